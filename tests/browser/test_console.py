"""The web console in a real browser (headless Chromium): upload a dataset through the page,
create jobs through the form, watch the chart receive points, cancel, download and compare the
result with the API's, API keys, the API reference, and no console errors (CSP violations
included) on any page."""

import csv
import io
import json
import time
import urllib.request

import pytest
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.select import Select
from selenium.webdriver.support.ui import WebDriverWait

WAIT = 60


def wait(driver, condition, timeout=WAIT, message=""):
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda d: condition(d), message)
    except TimeoutException:
        main = driver.find_elements(By.ID, "main")
        shown = main[0].text[:2000] if main else driver.page_source[:2000]
        raise TimeoutException(f"{message}\nat {driver.current_url}\npage:\n{shown}") from None


def text(driver, css):
    found = driver.find_elements(By.CSS_SELECTOR, css)
    return found[0].text if found else ""


def visit(driver, server, hash_):
    driver.get(server.url + "/#" + hash_)


def severe_logs(driver):
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


@pytest.fixture(scope="session")
def dataset(browser, server, patients_csv):
    """Uploads the patients through the page; returns the dataset (the API's JSON)."""
    visit(browser, server, "/datasets")
    wait(browser, lambda d: d.find_elements(By.ID, "upload-file"))
    browser.find_element(By.ID, "upload-file").send_keys(str(patients_csv))
    browser.find_element(By.ID, "upload-name").send_keys("patients")
    browser.find_element(By.ID, "upload-button").click()
    wait(browser, lambda d: "#/datasets/" in d.current_url, message="the upload did not finish")
    dataset_id = browser.current_url.rsplit("/", 1)[1]
    wait(browser, lambda d: text(d, "#dataset-name") == "patients")
    return json.loads(server.get("/v1/datasets/" + dataset_id))


def fill_job_form(driver, server, dataset_id, roles, privacy="k-anonymity(k=5)", algorithm="genetic",
                  time_limit="4s"):
    visit(driver, server, "/new?dataset=" + dataset_id)
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "select[data-column]"))
    for column, role in roles.items():
        Select(driver.find_element(By.CSS_SELECTOR, f'select[data-column="{column}"]')).select_by_value(role)
    for id_, value in (("privacy", privacy), ("time_limit", time_limit)):
        el = driver.find_element(By.ID, id_)
        el.clear()
        el.send_keys(value)
    Select(driver.find_element(By.ID, "algorithm")).select_by_value(algorithm)


def submit_job(driver):
    driver.find_element(By.ID, "submit-job").click()
    wait(driver, lambda d: "#/jobs/" in d.current_url, message="the job was not created")
    return driver.current_url.rsplit("/", 1)[1]


QIS = {c: "quasi_identifying" for c in ("age", "zip", "sex", "weight", "height", "income", "education")}


def test_upload_shows_the_column_profile(browser, dataset, patients_csv):
    rows = list(csv.DictReader(open(patients_csv)))
    assert dataset["rows"] == len(rows) == 3000
    table = browser.find_element(By.ID, "profile-table")
    cells = [[td.text for td in tr.find_elements(By.TAG_NAME, "td")] for tr in table.find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert [c[0] for c in cells] == ["age", "zip", "sex", "weight", "height", "income", "education", "disease"]
    for c in cells:
        # Distinct counts, computed here from the file.
        assert int(c[2].replace(",", "")) == len({r[c[0]] for r in rows}), c
    types = {c[0]: c[1] for c in cells}
    assert types["age"].startswith("integer")
    assert types["sex"].startswith(("text", "code"))
    # The suggested hierarchy of age is a builder specification.
    assert '"type"' in cells[0][5]


def test_hierarchy_preview_from_a_builder_spec(browser, server, dataset):
    visit(browser, server, "/datasets/" + dataset["id"])
    wait(browser, lambda d: d.find_elements(By.ID, "preview-spec"))
    Select(browser.find_element(By.ID, "preview-column")).select_by_value("age")
    spec = browser.find_element(By.ID, "preview-spec")
    spec.clear()
    spec.send_keys(json.dumps({"type": "interval", "width": 10, "levels": [2]}))
    browser.find_element(By.ID, "preview-button").click()
    wait(browser, lambda d: d.find_elements(By.ID, "preview-table"))
    rows = browser.find_elements(By.CSS_SELECTOR, "#preview-table tbody tr")
    first = [td.text for td in rows[0].find_elements(By.TAG_NAME, "td")]
    assert first[0] == "18"
    assert first[-1] == "*"
    # 18 lies in the interval [10, 20[.
    assert "10" in first[1] and "20" in first[1]


def test_job_from_the_form_streams_to_the_chart_and_downloads_the_result(browser, server, dataset, downloads, screenshots):
    fill_job_form(browser, server, dataset["id"], dict(QIS, disease="sensitive"), time_limit="5s")
    assert "candidates" not in json.loads(browser.find_element(By.ID, "job-json").text)  # the API's default
    browser.find_element(By.ID, "candidates").send_keys("3")
    shown = json.loads(browser.find_element(By.ID, "job-json").text)
    assert shown["candidates"] == 3
    assert shown["dataset_id"] == dataset["id"]
    assert shown["algorithm"] == "genetic"
    assert shown["privacy"] == ["k-anonymity(k=5)"]
    assert shown["attributes"]["age"]["type"] == "quasi_identifying"
    assert shown["attributes"]["age"]["hierarchy"] == dataset["columns"][0]["suggested_hierarchy"]
    job_id = submit_job(browser)

    # The chart receives points while the job runs.
    chart = browser.find_element(By.ID, "chart")
    wait(browser, lambda d: "running" in text(d, "#job-status") and int(chart.get_attribute("data-points")) >= 1,
         message="no point while running")
    assert browser.find_elements(By.CSS_SELECTOR, "#chart canvas")
    wait(browser, lambda d: "succeeded" in text(d, "#job-status"), message="the job did not succeed")
    report = json.loads(server.get(f"/v1/jobs/{job_id}/result"))
    assert json.loads(server.get(f"/v1/jobs/{job_id}/spec"))["candidates"] == 3
    assert 1 <= len(report["candidates"]) <= 3
    wait(browser, lambda d: text(d, "#job-algorithm") == "genetic")
    assert int(chart.get_attribute("data-points")) == len(report["trace"]) >= 1
    # Each improvement is marked with the strategy that found it (here: the job's algorithm).
    assert "found by genetic" in chart.text
    strategies = browser.find_elements(By.CSS_SELECTOR, "#improvements-table tbody td:last-child")
    assert strategies and {s.text for s in strategies} == {"genetic"}

    # The best transformation per attribute, with loss and example values from the result.
    # (The report's sections are filled in order once it is loaded: the risk table comes last.)
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#risk-table tbody tr"), message="no risk table")
    rows = browser.find_elements(By.CSS_SELECTOR, "#transformation-table tbody tr")
    got = {r.find_elements(By.TAG_NAME, "td")[0].text: [td.text for td in r.find_elements(By.TAG_NAME, "td")] for r in rows}
    assert {k: int(v[1]) for k, v in got.items()} == report["transformation"]
    result_csv = server.get(f"/v1/jobs/{job_id}/result.csv").decode()
    first = next(csv.DictReader(io.StringIO(result_csv)))
    assert first["age"] in got["age"][3].split(" · ")
    # Risks before and after: one table (measure | before | after | bar) and the distribution chart.
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#risk-table tbody tr"), message="no risk table")
    rows = {r.find_elements(By.TAG_NAME, "td")[0].text: [td.text for td in r.find_elements(By.TAG_NAME, "td")]
            for r in browser.find_elements(By.CSS_SELECTOR, "#risk-table tbody tr")}
    highest = rows["Highest prosecutor risk"]
    assert highest[1] == f"{100 * report['risk']['input']['highest_risk']:.2f} %"
    assert highest[2] == f"{100 * report['risk']['output']['highest_risk']:.2f} %"
    assert rows["Suppressed records"][2] == f"{report['risk']['output']['suppressed']:,}"
    assert browser.find_elements(By.CSS_SELECTOR, "#risk-table .bar.after")
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#risk-chart canvas"), message="no risk chart")
    assert int(browser.find_element(By.ID, "risk-chart").get_attribute("data-bars")) == len(report["risk"]["input"]["distribution"])
    # The utility chart's time axis runs to the end of the search, not to the last improvement.
    assert float(chart.get_attribute("data-end")) == pytest.approx(report["elapsed_ms"])
    if screenshots:
        screenshots.mkdir(parents=True, exist_ok=True)
        browser.execute_script("window.scrollTo(0, 0)")
        browser.save_screenshot(str(screenshots / "console-job.png"))

    # Download through the page: the same bytes as GET result.csv.
    browser.find_element(By.ID, "download-csv").click()
    target = downloads / f"{job_id}.csv"
    wait(browser, lambda d: target.exists() and target.stat().st_size == len(result_csv.encode()), message="no download")
    assert target.read_text() == result_csv

    # The job list shows it with its algorithm and best utility.
    browser.execute_script("performance.clearResourceTimings()")
    visit(browser, server, "/jobs")
    wait(browser, lambda d: job_id in text(d, "#jobs-table"))
    row = [r for r in browser.find_elements(By.CSS_SELECTOR, "#jobs-table tbody tr") if job_id in r.text][0]
    cells = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
    assert cells[1] == "succeeded" and cells[2] == "patients" and cells[3] == "genetic"
    assert float(cells[5]) == pytest.approx(report["utility"], abs=1e-4)
    # The algorithm comes from the job view: the list downloads no report.
    fetched = browser.execute_script("return performance.getEntriesByType('resource').map((e) => e.name)")
    assert not [u for u in fetched if "/result" in u], fetched


def test_cancel_a_running_job(browser, server, dataset):
    fill_job_form(browser, server, dataset["id"], QIS, time_limit="120s")
    job_id = submit_job(browser)
    wait(browser, lambda d: d.find_element(By.ID, "cancel").is_displayed())
    browser.find_element(By.ID, "cancel").click()
    wait(browser, lambda d: "cancelled" in text(d, "#job-status"), message="the job was not cancelled")
    assert json.loads(server.get(f"/v1/jobs/{job_id}"))["status"] == "cancelled"
    assert not browser.find_element(By.ID, "cancel").is_displayed()


def test_api_errors_appear_next_to_the_field(browser, server, dataset):
    fill_job_form(browser, server, dataset["id"], QIS, privacy="k-anonymity(k=0)")
    browser.find_element(By.ID, "submit-job").click()
    wait(browser, lambda d: text(d, "#privacy-error"))
    assert text(d := browser, "#privacy-error").startswith("privacy")
    assert browser.find_element(By.ID, "privacy").get_attribute("aria-invalid") == "true"
    assert "#/new" in d.current_url
    # Fixed privacy, bad time limit: the error moves to that field.
    el = browser.find_element(By.ID, "privacy")
    el.clear()
    el.send_keys("k-anonymity(k=2)")
    el = browser.find_element(By.ID, "time_limit")
    el.clear()
    el.send_keys("soon")
    browser.find_element(By.ID, "submit-job").click()
    wait(browser, lambda d: text(d, "#time_limit-error"))
    assert text(browser, "#privacy-error") == ""
    assert "time_limit" in text(browser, "#time_limit-error")
    # Fixed time limit, too many candidates: the error moves to that field.
    el = browser.find_element(By.ID, "time_limit")
    el.clear()
    el.send_keys("4s")
    browser.find_element(By.ID, "candidates").send_keys("101")
    browser.find_element(By.ID, "submit-job").click()
    wait(browser, lambda d: text(d, "#candidates-error"))
    assert text(browser, "#time_limit-error") == ""
    assert "candidates" in text(browser, "#candidates-error")
    assert browser.find_element(By.ID, "candidates").get_attribute("aria-invalid") == "true"


def test_wrong_api_key_shows_an_error_and_no_data(browser, keyed_server, patients_csv):
    key = "correct-horse-battery"
    req = urllib.request.Request(keyed_server.url + "/v1/datasets?name=secret-patients", data=open(patients_csv, "rb").read(),
                                 headers={"Authorization": "Bearer " + key, "Content-Type": "text/csv"}, method="POST")
    urllib.request.urlopen(req, timeout=30).read()
    visit(browser, keyed_server, "/datasets")
    wait(browser, lambda d: d.find_elements(By.ID, "api-key"))
    browser.find_element(By.ID, "api-key").send_keys("wrong-key")
    browser.find_element(By.CSS_SELECTOR, "#key-form button[type=submit]").click()
    wait(browser, lambda d: text(d, "#key-error"))
    assert "refused" in text(browser, "#key-error")
    assert "secret-patients" not in browser.find_element(By.TAG_NAME, "body").text
    assert not browser.find_elements(By.ID, "datasets-table")
    # The key lives in session storage only; no cookie is set.
    assert browser.execute_script("return sessionStorage.getItem('deid.apiKey')") == "wrong-key"
    assert browser.get_cookies() == []
    field = browser.find_element(By.ID, "api-key")
    field.clear()
    field.send_keys(key)
    browser.find_element(By.CSS_SELECTOR, "#key-form button[type=submit]").click()
    wait(browser, lambda d: "secret-patients" in text(d, "#datasets-table"))


def test_the_chart_decimates_10000_improvements(browser, server):
    visit(browser, server, "/jobs")
    wait(browser, lambda d: d.find_elements(By.ID, "job-list"))
    result = browser.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const src = document.querySelector('script[type=module]').src;
        import(new URL('./chart.js', src)).then((m) => {
          const el = document.createElement('div');
          el.style.width = '800px';
          document.getElementById('main').append(el);
          const chart = new m.UtilityChart(el);
          const points = [];
          for (let i = 0; i < 10000; i++) points.push({t: i * 3, u: i / 10000, strategy: i % 2 ? 'a' : 'b'});
          chart.add(points);
          requestAnimationFrame(() => requestAnimationFrame(() => done({
            points: el.dataset.points, drawn: el.dataset.drawn, canvas: !!el.querySelector('canvas'),
            legend: el.textContent})));
        }).catch((e) => done({error: String(e)}));
    """)
    assert "error" not in result, result
    assert result["points"] == "10000"
    assert result["canvas"]
    assert 100 <= int(result["drawn"]) <= 4 * 800
    assert "found by a" in result["legend"] and "found by b" in result["legend"]


def test_api_reference_is_rendered_from_openapi(browser, server):
    visit(browser, server, "/api")
    wait(browser, lambda d: d.find_elements(By.ID, "schema-JobSpec"))
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "POST /v1/jobs" in body
    assert "GET /v1/jobs/{id}/events" in body
    assert "suppression_limit" in browser.find_element(By.ID, "schema-JobSpec").text


def test_pages_load_without_errors_or_policy_violations(browser, server, dataset, screenshots):
    # A finished job, for its page (chart, tables, risk bars).
    spec = {"dataset_id": dataset["id"], "privacy": ["k-anonymity(k=3)"], "algorithm": "flash", "time_limit": "20s",
            "attributes": {c["name"]: {"type": "quasi_identifying", "hierarchy": c["suggested_hierarchy"]}
                           for c in dataset["columns"] if c["name"] in ("age", "sex")}}
    req = urllib.request.Request(server.url + "/v1/jobs", data=json.dumps(spec).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    job_id = json.loads(urllib.request.urlopen(req, timeout=30).read())["id"]
    browser.get_log("browser")  # drop earlier entries
    for page in ("/jobs", "/jobs/" + job_id, "/datasets", "/datasets/" + dataset["id"], "/new", "/api"):
        visit(browser, server, page)
        wait(browser, lambda d: len(d.find_element(By.ID, "main").text) > 20)
        if page.startswith("/jobs/"):
            wait(browser, lambda d: d.find_elements(By.ID, "risk-table"), message="the job did not finish")
        time.sleep(0.3)  # late console messages of the page (a violated policy is logged, not thrown)
        assert severe_logs(browser) == [], page
    # Keyboard: the skip link is the first focus stop of a freshly loaded page.
    browser.refresh()
    wait(browser, lambda d: d.find_elements(By.ID, "schema-JobSpec"))
    browser.find_element(By.TAG_NAME, "body").send_keys("\t")
    assert browser.switch_to.active_element.text == "Skip to content"
    if screenshots:
        visit(browser, server, "/datasets/" + dataset["id"])
        wait(browser, lambda d: d.find_elements(By.ID, "profile-table"))
        browser.find_element(By.ID, "preview-button").click()
        wait(browser, lambda d: d.find_elements(By.ID, "preview-table"))
        browser.save_screenshot(str(screenshots / "console-dataset.png"))


def test_a_risk_analysis_job_shows_its_risks_and_no_csv(browser, server, dataset):
    spec = {"dataset_id": dataset["id"], "task": "risk",
            "attributes": {c: {"type": "quasi_identifying"} for c in ("age", "sex", "zip")}}
    req = urllib.request.Request(server.url + "/v1/jobs", data=json.dumps(spec).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=30) as r:
        job = json.loads(r.read())
    visit(browser, server, "/jobs/" + job["id"])
    wait(browser, lambda d: "risk analysis" in text(d, "#job-algorithm"), message="the risk job did not finish")
    wait(browser, lambda d: d.find_elements(By.ID, "risk-table"))
    assert not browser.find_element(By.ID, "download-csv").is_displayed()
    assert browser.find_element(By.ID, "download-report").is_displayed()
    report = json.loads(browser.find_element(By.ID, "report-json").get_attribute("textContent"))
    assert report == json.loads(server.get(f"/v1/jobs/{job['id']}/result"))
    visit(browser, server, "/jobs")
    wait(browser, lambda d: job["id"] in text(d, "#jobs-table"))
    row = [r for r in browser.find_elements(By.CSS_SELECTOR, "#jobs-table tbody tr") if job["id"] in r.text][0]
    assert [td.text for td in row.find_elements(By.TAG_NAME, "td")][3] == "risk"
    assert not severe_logs(browser)


def test_a_differentially_private_job_from_the_form(browser, server, dataset):
    dp = "differential-privacy(epsilon=1,delta=1e-6)"
    # Every column must be generalized or removed: a column left as it is is refused, next to it.
    fill_job_form(browser, server, dataset["id"], QIS, privacy=dp, algorithm="auto", time_limit="30s")
    browser.find_element(By.ID, "submit-job").click()
    wait(browser, lambda d: "attributes.disease" in d.find_element(By.ID, "job-form").text,
         message="no error next to the column left as it is")
    assert "#/new" in browser.current_url
    # The refused submission is logged by the browser as a failed request (422): read the log
    # here, so that later tests see only their own errors.
    assert all("422" in e["message"] for e in severe_logs(browser))

    fill_job_form(browser, server, dataset["id"], dict(QIS, disease="identifying"), privacy=dp,
                  algorithm="auto", time_limit="30s")
    shown = json.loads(browser.find_element(By.ID, "job-json").text)
    assert shown["privacy"] == [dp]
    assert shown["attributes"]["disease"]["type"] == "identifying"
    job_id = submit_job(browser)
    wait(browser, lambda d: "succeeded" in text(d, "#job-status"), message="the job did not succeed")
    report = json.loads(server.get(f"/v1/jobs/{job_id}/result"))
    r = report["differential_privacy"]
    assert r["epsilon"] == 1 and r["delta"] == 1e-6
    assert r["epsilon_search"] == pytest.approx(0.1) and r["epsilon_anonymization"] == pytest.approx(0.9)
    # The page shows the configuration that reproduces the sample: ε split, δ, k, β, seed.
    wait(browser, lambda d: d.find_element(By.ID, "dp-summary").is_displayed())
    summary = text(browser, "#dp-summary")
    for part in (f"k = {r['k']}", f"β = {r['beta']:.4f}", f"seed {r['seed']}",
                 f"{r['sampled_records']} of {r['input_records']} records sampled",
                 f"{r['released_records']} released"):
        assert part in summary, (part, summary)
    # The result: the released records only, every class (all columns) of at least k of them.
    rows = list(csv.reader(io.StringIO(server.get(f"/v1/jobs/{job_id}/result.csv").decode())))
    classes = {}
    for row in rows[1:]:
        classes[tuple(row)] = classes.get(tuple(row), 0) + 1
    assert "disease" not in rows[0]
    assert sum(classes.values()) == r["released_records"] <= r["sampled_records"] < r["input_records"]
    assert all(n >= r["k"] for n in classes.values()), classes


def test_a_local_generalization_job_from_the_form(browser, server, dataset):
    fill_job_form(browser, server, dataset["id"], QIS, algorithm="auto", time_limit="30s")
    assert "local" not in json.loads(browser.find_element(By.ID, "job-json").text)  # global
    Select(browser.find_element(By.ID, "local_method")).select_by_value("sweep")
    shown = json.loads(browser.find_element(By.ID, "job-json").text)
    assert shown["local"] == {"method": "sweep"}
    job_id = submit_job(browser)
    wait(browser, lambda d: "succeeded" in text(d, "#job-status"), message="the job did not succeed")
    report = json.loads(server.get(f"/v1/jobs/{job_id}/result"))
    local = report["local"]
    assert local["method"] == "sweep"
    wait(browser, lambda d: d.find_element(By.ID, "local-summary").is_displayed())
    summary = text(browser, "#local-summary")
    assert f"Local generalization (sweep): {len(local['steps'])} transformations" in summary, summary
    # Every class of the output, formed by the quasi-identifiers' values, has at least k records.
    found = classes(server.get(f"/v1/jobs/{job_id}/result.csv").decode(), list(QIS))
    assert found and all(n >= 5 for n in found.values()), found


def post_json(server, path, body):
    req = urllib.request.Request(server.url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def wait_job(server, job_id, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = json.loads(server.get(f"/v1/jobs/{job_id}"))
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} did not end")


def classes(csv_text, qis):
    """Records per combination of quasi-identifier values, suppressed rows (all `*`) left out."""
    out = {}
    for row in csv.DictReader(io.StringIO(csv_text)):
        key = tuple(row[q] for q in qis)
        if all(v == "*" for v in key):
            continue
        out[key] = out.get(key, 0) + 1
    return out


def test_a_candidate_is_evaluated_with_one_click_and_its_release_downloaded(browser, server, dataset, downloads, patients_csv,
                                                                           screenshots):
    qis = ("age", "sex", "zip")
    spec = {"dataset_id": dataset["id"], "privacy": ["k-anonymity(k=4)"], "algorithm": "flash", "time_limit": "30s",
            "candidates": 6, "suppression_limit": 0.02,
            "attributes": {c["name"]: {"type": "quasi_identifying", "hierarchy": c["suggested_hierarchy"]}
                           for c in dataset["columns"] if c["name"] in qis}}
    job = post_json(server, "/v1/jobs", spec)
    assert job["algorithm"] == "flash"
    visit(browser, server, "/jobs/" + job["id"])
    wait(browser, lambda d: d.find_elements(By.ID, "candidates-table"), message="no candidates")
    report = json.loads(server.get(f"/v1/jobs/{job['id']}/result"))
    candidates = report["candidates"]
    assert 2 <= len(candidates) <= 6 and candidates[0]["levels"] == report["levels"]
    order = report["quasi_identifiers"]
    heads = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#candidates-table thead th")]
    assert heads[1:1 + len(order)] == order
    rows = browser.find_elements(By.CSS_SELECTOR, "#candidates-table tbody tr")
    assert len(rows) == len(candidates)
    for row, c in zip(rows, candidates):
        cells = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
        assert [int(x) for x in cells[1:1 + len(order)]] == [c["transformation"][q] for q in order]
        assert int(cells[2 + len(order)].replace(",", "")) == c["suppressed_rows"]

    # Utility analysis: the most frequent values before (counted here from the input) and after
    # (counted here from the output), with the suppressed records.
    section = browser.find_element(By.CSS_SELECTOR, '#utility-analysis section[data-column="age"]')
    before = section.find_elements(By.CSS_SELECTOR, '.bars[data-side="before"] > span')
    counts = {}
    for r in csv.DictReader(open(patients_csv)):
        counts[r["age"]] = counts.get(r["age"], 0) + 1
    top = max(counts.items(), key=lambda kv: (kv[1], -int(kv[0])))
    assert (before[0].text, int(before[1].text.replace(",", ""))) == (top[0], top[1])
    result_csv = server.get(f"/v1/jobs/{job['id']}/result.csv").decode()
    out_counts = {}
    for r in csv.DictReader(io.StringIO(result_csv)):
        out_counts[r["age"]] = out_counts.get(r["age"], 0) + 1
    # Suppressed records show * (the default marker) in every quasi-identifier.
    out_counts["*"] = out_counts.get("*", 0) - report["suppressed_rows"]
    after = section.find_elements(By.CSS_SELECTOR, '.bars[data-side="after"] > span')
    shown = {after[i].text: int(after[i + 1].text.replace(",", "")) for i in range(0, len(after), 2)}
    assert shown
    for value, n in shown.items():
        if value == "(suppressed)":
            assert n == report["suppressed_rows"]
        elif not value.startswith("("):
            assert out_counts[value] == n, value
    assert section.find_elements(By.CSS_SELECTOR, "table.posthoc tbody tr")
    if screenshots:
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#risk-chart canvas"))
        browser.execute_script("document.getElementById('candidates').previousElementSibling.scrollIntoView()")
        browser.save_screenshot(str(screenshots / "console-compare.png"))

    # One click on the second candidate: an evaluate job with its levels, whose release is
    # downloadable and k-anonymous (checked here from the CSV).
    chosen = candidates[1]
    rows[1].find_element(By.CSS_SELECTOR, "button.candidate-evaluate").click()
    wait(browser, lambda d: d.current_url.rsplit("/", 1)[1] != job["id"], message="no evaluate job")
    evaluate_id = browser.current_url.rsplit("/", 1)[1]
    evaluated = wait_job(server, evaluate_id)
    assert evaluated["task"] == "evaluate" and evaluated["status"] == "succeeded"
    assert evaluated["algorithm"] is None
    stored = json.loads(server.get(f"/v1/jobs/{evaluate_id}/spec"))
    assert stored["task"] == "evaluate" and stored["levels"] == chosen["transformation"]
    evaluation = json.loads(server.get(f"/v1/jobs/{evaluate_id}/result"))
    assert evaluation["transformation"] == chosen["transformation"]
    assert evaluation["suppressed_rows"] == chosen["suppressed_rows"]
    assert evaluation["utility"] == pytest.approx(chosen["utility"])
    wait(browser, lambda d: d.find_element(By.ID, "download-csv").is_displayed(), message="no download")
    browser.find_element(By.ID, "download-csv").click()
    target = downloads / f"{evaluate_id}.csv"
    released = server.get(f"/v1/jobs/{evaluate_id}/result.csv").decode()
    wait(browser, lambda d: target.exists() and target.stat().st_size == len(released.encode()), message="no download")
    assert target.read_text() == released
    sizes = classes(released, qis)
    assert sizes and min(sizes.values()) >= 4
    assert sum(sizes.values()) == 3000 - chosen["suppressed_rows"]
    assert "An evaluation" in text(browser, "#candidates-none")
    assert not severe_logs(browser)


def test_lists_page_through_next_cursor(browser, fresh_server):
    s = fresh_server
    body = b"a,b\n1,2\n"
    for i in range(101):
        req = urllib.request.Request(f"{s.url}/v1/datasets?name=d{i:03d}", data=body, method="POST",
                                     headers={"Content-Type": "text/csv"})
        urllib.request.urlopen(req, timeout=30).read()
    visit(browser, s, "/datasets")
    wait(browser, lambda d: d.find_elements(By.ID, "datasets-table"))
    first = browser.find_elements(By.CSS_SELECTOR, "#datasets-table tbody tr")
    assert len(first) == 100
    assert browser.find_element(By.ID, "datasets-pager-prev").get_attribute("disabled")
    names = {r.find_element(By.TAG_NAME, "td").text for r in first}
    browser.find_element(By.ID, "datasets-pager-next").click()
    wait(browser, lambda d: text(d, "#datasets-pager-page") == "Page 2")
    second = browser.find_elements(By.CSS_SELECTOR, "#datasets-table tbody tr")
    names |= {r.find_element(By.TAG_NAME, "td").text for r in second}
    assert len(second) == 1 and names == {f"d{i:03d}" for i in range(101)}
    assert browser.find_element(By.ID, "datasets-pager-next").get_attribute("disabled")
    browser.find_element(By.ID, "datasets-pager-prev").click()
    wait(browser, lambda d: text(d, "#datasets-pager-page") == "Page 1")

    # Jobs, with a page size of 2: every job once, over the pages.
    ds = json.loads(s.get("/v1/datasets?limit=1"))["items"][0]["id"]
    ids = set()
    for _ in range(5):
        job = post_json(s, "/v1/jobs", {"dataset_id": ds, "task": "risk", "attributes": {"a": {"type": "quasi_identifying"}}})
        ids.add(job["id"])
    visit(browser, s, "/jobs?limit=2")
    seen = []
    for page in (1, 2, 3):
        wait(browser, lambda d: text(d, "#jobs-pager-page") == f"Page {page}")
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#jobs-table tbody tr"))
        seen += [r.find_element(By.TAG_NAME, "a").text for r in browser.find_elements(By.CSS_SELECTOR, "#jobs-table tbody tr")]
        if page < 3:
            browser.find_element(By.ID, "jobs-pager-next").click()
    assert sorted(seen) == sorted(ids)
    assert browser.find_element(By.ID, "jobs-pager-next").get_attribute("disabled")
