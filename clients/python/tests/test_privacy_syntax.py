"""``str()`` of a privacy model is deid's compact syntax and always parses back to the same model:
values that need it are quoted (crates/deid-engine/src/privacy/syntax.rs). Checked by the
strings themselves and by posting the text forms to a real deid."""

from __future__ import annotations

import csv
import io
import random
import re
from typing import Any, Mapping, Sequence

import pytest

from deid_client import (
    Attribute,
    BasicBetaLikeness,
    Client,
    DeltaDisclosure,
    DistinctLDiversity,
    EnhancedBetaLikeness,
    EntropyLDiversity,
    JobSpec,
    KAnonymity,
    PrivacyModel,
    RecursiveLDiversity,
    TCloseness,
    ValidationError,
    suppression,
)
from deid_client._adapter import MODELS_WITHOUT_SENSITIVE, sensitive_read
from deid_client.builders import compact_value

# Column names that break an unquoted value, or that a careless quoting rule would change.
AWKWARD = [
    "a,b",
    "x=(y)",
    "f(x)",
    "a)b",
    "k=5,l=2",
    'say "hi"',
    '"',
    '""',
    "back\\slash",
    'C:\\dir\\"',
    "\\",
    " padded ",
    "trailing ",
    "\ttab",
    "nbsp\u00a0",
    "\u3000ideographic space",
    "inner space",
    "Ünïcode ✓ 名前",
    "semi;colon",
    "it's",
    "attribute=x",
]


def random_names(count: int) -> list[str]:
    """Names from an alphabet of awkward characters (fixed seed)."""
    rng = random.Random(23)
    alphabet = ["a", "Z", "é", "名", ",", "(", ")", "=", '"', "\\", " ", "\t", "\u00a0", "'", ";", "."]
    names: set[str] = set()
    while len(names) < count:
        names.add("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8))))
    return sorted(names)


def test_plain_values_stay_as_they_are() -> None:
    assert str(KAnonymity(5)) == "k-anonymity(k=5)"
    assert str(DistinctLDiversity("disease", 2)) == "distinct-l-diversity(attribute=disease,l=2)"
    assert str(EntropyLDiversity("inner space", 2.5, "grassberger")) == (
        "entropy-l-diversity(attribute=inner space,l=2.5,estimator=grassberger)"
    )
    assert str(TCloseness("Ünïcode", 0.2, "ordered")) == "t-closeness(attribute=Ünïcode,t=0.2,distance=ordered)"
    # Backslashes are ordinary characters of the syntax: no escaping.
    assert str(DistinctLDiversity("back\\slash", 2)) == "distinct-l-diversity(attribute=back\\slash,l=2)"


@pytest.mark.parametrize(
    ("name", "written"),
    [
        ("a,b", '"a,b"'),
        ("x=(y)", '"x=(y)"'),
        ("f(x)", '"f(x)"'),
        ("a)b", '"a)b"'),
        ('say "hi"', '"say ""hi"""'),
        ('"', '""""'),
        ('C:\\dir\\"', '"C:\\dir\\"""'),
        (" padded ", '" padded "'),
        ("\ttab", '"\ttab"'),
        ("nbsp\u00a0", '"nbsp\u00a0"'),
        ("\u3000x", '"\u3000x"'),
        ("", '""'),
    ],
)
def test_values_that_need_it_are_quoted(name: str, written: str) -> None:
    assert compact_value(name) == written
    assert str(DistinctLDiversity(name, 2)) == f"distinct-l-diversity(attribute={written},l=2)"


def models_of(name: str) -> list[PrivacyModel]:
    """Every model with an attribute, each satisfied by a column with the values x, y, z in
    every class (the classes' distributions equal the table's)."""
    return [
        DistinctLDiversity(name, 3),
        EntropyLDiversity(name, 2.5, "shannon"),
        RecursiveLDiversity(name, 2, 2),
        TCloseness(name, 0.1, "equal"),
        DeltaDisclosure(name, 0.5),
        BasicBetaLikeness(name, 0.5),
        EnhancedBetaLikeness(name, 0.5),
    ]


def test_text_forms_parse_to_the_same_models_in_deid(client: Client) -> None:
    """A dataset whose sensitive columns carry the awkward names: an evaluation job whose models
    are given as ``str(model)`` finds every column (a name parsed differently is an unknown
    column) and the same result as the object form; deid names the column of a text form as given."""
    names = AWKWARD + random_names(40)
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerow(["group", *names])
    for i in range(6):
        writer.writerow(["AB"[i // 3], *("xyz"[i % 3] for _ in names)])
    ds = client.upload_dataset(out.getvalue().encode(), name="awkward names", delimiter=",")
    assert [c.name for c in ds.columns] == ["group", *names]

    attributes: dict[str, Attribute] = {"group": Attribute.quasi_identifying(suppression())}
    attributes.update({n: Attribute.sensitive() for n in names})
    models = [KAnonymity(3), *(m for n in names for m in models_of(n))]

    def evaluate(privacy: Sequence[str | Mapping[str, Any]]) -> tuple[str, bool, dict[str, Any]]:
        spec = JobSpec(
            dataset_id=ds.id,
            attributes=attributes,
            privacy=privacy,
            task="evaluate",
            levels={"group": 0},
        )
        job = client.wait(client.submit_job(spec), progress=False)
        evaluation = client.get_evaluation(job.id)
        return job.status, evaluation.anonymous, evaluation.raw

    text = [str(m) for m in models]
    status, anonymous, by_text = evaluate(text)
    assert (status, anonymous) == ("succeeded", True), text
    _, _, by_object = evaluate([m.to_json() for m in models])
    for own in ("job_id", "timings"):
        by_text.pop(own, None)
        by_object.pop(own, None)
    assert by_text == by_object

    # The parameters after a quoted value count: ℓ = 4 exceeds the three values of the column,
    # which deid's answer names exactly as given.
    for name in (" padded ", 'C:\\dir\\"', "k=5,l=2", "\ttab"):
        with pytest.raises(ValidationError) as e:
            evaluate([str(DistinctLDiversity(name, 4))])
        assert e.value.field == "privacy[0].l"
        assert f"at least 4 distinct values of '{name}' in every class" in e.value.message


def test_the_adapters_know_which_models_read_no_sensitive_value(client: Client) -> None:
    """The adapters' verification sends sensitive values only when a model may read them
    (``_adapter.sensitive_read``): the models it trusts to read none are exactly those whose
    syntax, as deid lists it, has no ``attribute``."""
    ds = client.upload_dataset(b"a,b\n1,x\n", name="models", delimiter=",")
    spec = JobSpec(dataset_id=ds.id, attributes={"a": Attribute.quasi_identifying(suppression())},
                   privacy=["no-such-model"])
    with pytest.raises(ValidationError) as e:
        client.submit_job(spec)
    syntaxes = re.findall(r"([a-z-]+)\(([^)]*)\)", e.value.message.split("expected one of: ", 1)[1])
    assert len(syntaxes) >= 14, e.value.message
    assert MODELS_WITHOUT_SENSITIVE == {name for name, params in syntaxes if "attribute=" not in params}

    assert not sensitive_read({"privacy": [" K-Anonymity (k=5)", {"model": "k-map", "k": 3}, str(KAnonymity(2))]})
    assert sensitive_read({"privacy": ["k-anonymity(k=5)", "t-closeness(attribute=x,t=0.2,distance=equal)"]})
    assert sensitive_read({"privacy": [{"model": "distinct-l-diversity", "attribute": "x", "l": 2}]})
    assert sensitive_read({"privacy": [KAnonymity(5)]})  # not a text or an object: counts as reading
    assert sensitive_read({"privacy": "k-anonymity(k=5)"})
    assert sensitive_read({})
