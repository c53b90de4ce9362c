"""gates.csv as JUnit XML (junit.xml), the format CI systems read."""

from __future__ import annotations

import re

import pandas as pd

from harness.analysis.gate_rows import gate_name, verdicts_of

# XML 1.0 cannot hold most control characters, even escaped.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_text(value) -> str:
    return _NOT_XML.sub("\ufffd", str(value))


def junit_xml(gates: pd.DataFrame, suite: str) -> str:
    """The checks as JUnit XML, the format GitHub, GitLab and Jenkins read: <testsuites> with
    one <testsuite>, one <testcase> per check (classname = the model), a <failure> on each
    check that did not pass, its message the verdict (fail or undecided), metric, interval or
    value, and bound. Undecided is a failure: a CI job must not ship on it. ElementTree
    escapes every string."""
    import xml.etree.ElementTree as ET

    verdicts = verdicts_of(gates) if len(gates) else pd.Series([], dtype=str)
    total, failed = len(gates), int((verdicts != "pass").sum())
    counts = {"tests": str(total), "failures": str(failed), "errors": "0", "time": "0"}
    root = ET.Element("testsuites", {"name": _xml_text(suite), **counts})
    suite_el = ET.SubElement(
        root, "testsuite", {"name": _xml_text(f"{suite} gates"), **counts, "skipped": "0"}
    )
    for row, verdict in zip(gates.to_dict("records"), verdicts, strict=True):
        case = ET.SubElement(
            suite_el,
            "testcase",
            {"name": _xml_text(gate_name(row)), "classname": _xml_text(row["model"]), "time": "0"},
        )
        if verdict != "pass":
            message = f"{verdict}: {row['detail']} [model {row['model']}]"
            failure = ET.SubElement(
                case, "failure", {"message": _xml_text(message), "type": f"gate-{verdict}"}
            )
            failure.text = _xml_text(f"{gate_name(row)}\n{message}")
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'
