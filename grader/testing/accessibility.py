"""The pages' accessibility audit: axe-core (as axe-playwright-python bundles it) run in headless Chromium on a page
Playwright has open, with the rules of WCAG 2.0 to 2.2, levels A and AA, and axe's best practices."""
from __future__ import annotations

from axe_playwright_python.sync_playwright import Axe

RULE_TAGS = ("wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice")
BLOCKING = ("critical", "serious", "moderate")  # the impacts a page must have none of; "minor" is reported only


def audit(page) -> dict:
    """{"violations": [(rule, impact, nodes, first target)], "rules": the rules that ran, "axe": its version}."""
    results = Axe().run(page, options={"runOnly": {"type": "tag", "values": list(RULE_TAGS)},
                                       "resultTypes": ["violations"]}).response
    ran = sorted(rule["ruleId"] for rule in page.evaluate(f"axe.getRules({list(RULE_TAGS)})"))
    return {"axe": results.get("testEngine", {}).get("version"), "rules": ran,
            "violations": [(rule["id"], rule["impact"], len(rule["nodes"]), rule["nodes"][0]["target"][0])
                           for rule in results["violations"]]}


def blocking(found: dict) -> list[tuple]:
    return [violation for violation in found["violations"] if violation[1] in BLOCKING]
