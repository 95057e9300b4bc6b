"""The pages' accessibility audit: axe-core, from the npm registry at the version and sha512 that
``grader/testing/axe/package-lock.json`` pins (``make axe``), run in headless Chromium on a page Playwright has open,
with the rules of WCAG 2.0 to 2.2, levels A and AA, and axe's best practices.  A release from npm rather than one
bundled on PyPI: the one there (axe-playwright-python's, 4.4.3) predates WCAG 2.2's rules."""
from __future__ import annotations

import json
from pathlib import Path

AXE_FOLDER = Path(__file__).with_name("axe")
AXE_SCRIPT = AXE_FOLDER / "node_modules" / "axe-core" / "axe.min.js"
RULE_TAGS = ("wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22a", "wcag22aa", "best-practice")
BLOCKING = ("critical", "serious", "moderate")  # the impacts a page must have none of; "minor" is reported only
# 200 % zoom of a 1280-pixel window: 640 CSS pixels at two device pixels each (Playwright's new_context options)
ZOOM_200 = {"viewport": {"width": 640, "height": 800}, "device_scale_factor": 2}


class AxeMissing(RuntimeError):
    pass


def pinned_version() -> str:
    lock = json.loads((AXE_FOLDER / "package-lock.json").read_text())
    return lock["packages"]["node_modules/axe-core"]["version"]


def axe_script() -> Path:
    """The installed axe, refused unless it is the pinned one (an older one would skip WCAG 2.2's rules)."""
    if not AXE_SCRIPT.is_file():
        raise AxeMissing(f"axe-core is not installed at {AXE_SCRIPT}: run `make axe` (it needs npm: e.g. "
                         "sudo apt-get install -y nodejs npm)")
    installed = json.loads((AXE_SCRIPT.parent / "package.json").read_text())["version"]
    if installed != pinned_version():
        raise AxeMissing(f"axe-core {installed} is installed, {pinned_version()} is pinned: run `make axe`")
    return AXE_SCRIPT


def audit(page) -> dict:
    """{"violations": [(rule, impact, nodes, first target)], "rules": the rules that ran, "axe": its version}."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(axe_script().read_text(encoding="utf-8"))  # not a <script>: our pages' CSP forbids inline ones
    results = page.evaluate("options => axe.run(document, options)",
                            {"runOnly": {"type": "tag", "values": list(RULE_TAGS)}, "resultTypes": ["violations"]})
    ran = sorted(rule["ruleId"] for rule in page.evaluate("tags => axe.getRules(tags)", list(RULE_TAGS)))
    return {"axe": results.get("testEngine", {}).get("version"), "rules": ran,
            "violations": [(rule["id"], rule["impact"], len(rule["nodes"]), rule["nodes"][0]["target"][0])
                           for rule in results["violations"]]}


def blocking(found: dict) -> list[tuple]:
    return [violation for violation in found["violations"] if violation[1] in BLOCKING]


def sideways(page) -> int:
    """How many CSS pixels the page is wider than its window: more than 1 needs a horizontal scroll."""
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
