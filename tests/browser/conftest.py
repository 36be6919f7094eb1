"""Fixtures of the browser tests: deid processes (SQLite in a temporary directory, with and
without API keys), headless Chromium driven by Debian's chromedriver, and a test dataset.

DEID_BIN names the deid binary (default: target/release/deid of this repository).
DEID_SCREENSHOTS=DIR makes the tests write screenshots of the job and dataset pages into DIR
(scripts/screenshots does that for docs/).
"""

import os
import random
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

REPO = Path(__file__).resolve().parents[2]
LISTENING = re.compile(r"listening on http://(127\.0\.0\.1:\d+)")


class Server:
    """A `deid serve` process on a free port."""

    def __init__(self, api_keys=None):
        binary = os.environ.get("DEID_BIN", str(REPO / "target" / "release" / "deid"))
        self.dir = tempfile.mkdtemp(prefix="deid-browser-")
        args = [binary, "serve", "--bind", "127.0.0.1:0", "--data-dir", self.dir]
        env = dict(os.environ, NO_COLOR="1", RUST_LOG="info")
        env.pop("DATABASE_URL", None)
        env.pop("DEID_API_KEYS", None)
        if api_keys:
            args += ["--api-keys", api_keys]
        self.log = open(os.path.join(self.dir, "log"), "w+")
        self.process = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.url = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.url is None:
            if self.process.poll() is not None:
                break
            self.log.seek(0)
            m = LISTENING.search(self.log.read())
            if m:
                self.url = "http://" + m.group(1)
            else:
                time.sleep(0.05)
        if self.url is None:
            self.log.seek(0)
            raise RuntimeError("deid did not start:\n" + self.log.read())

    def get(self, path, key=None):
        req = urllib.request.Request(self.url + path)
        if key:
            req.add_header("Authorization", "Bearer " + key)
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.read()

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def server():
    s = Server()
    yield s
    s.stop()


@pytest.fixture
def fresh_server():
    """A server of its own (a test that fills its lists)."""
    s = Server()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def keyed_server():
    s = Server(api_keys="acme:correct-horse-battery")
    yield s
    s.stop()


@pytest.fixture(scope="session")
def downloads():
    d = tempfile.mkdtemp(prefix="deid-downloads-")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def browser(downloads):
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1800", "--lang=en-US"):
        options.add_argument(arg)
    options.add_experimental_option("prefs", {
        "download.default_directory": str(downloads),
        "download.prompt_for_download": False,
    })
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(shutil.which("chromedriver") or "/usr/bin/chromedriver")
    driver = webdriver.Chrome(options=options, service=service)
    driver.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


@pytest.fixture(scope="session")
def patients_csv():
    """A CSV of 3,000 synthetic patients (fixed seed): seven quasi-identifiers with deep
    hierarchies (a solution space large enough for a search that runs for seconds) and a disease."""
    rng = random.Random(14)
    d = tempfile.mkdtemp(prefix="deid-csv-")
    path = Path(d) / "patients.csv"
    diseases = ["flu", "asthma", "diabetes", "gastritis", "bronchitis", "ulcer"]
    education = ["none", "primary", "secondary", "vocational", "bachelor", "master", "doctorate"]
    with open(path, "w") as f:
        f.write("age,zip,sex,weight,height,income,education,disease\n")
        for _ in range(3000):
            f.write(f"{rng.randint(18, 90)},{rng.randint(10000, 19999):05d},{rng.choice('FM')},"
                    f"{rng.randint(40, 140)},{rng.randint(150, 200)},{rng.randint(1000, 9999)},"
                    f"{rng.choice(education)},{rng.choice(diseases)}\n")
    yield path
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def screenshots():
    """The directory screenshots go to (DEID_SCREENSHOTS), or None."""
    d = os.environ.get("DEID_SCREENSHOTS")
    return Path(d) if d else None
