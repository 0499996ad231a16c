"""The page's screenshots in docs/screenshots/: 1280x800 and 390x844, light and dark, taken with the page tests'
Chromium against a server on the test model (whose translations are noise: its weights are random).

    .venv/bin/python tests/screenshots.py            # makes the test model if HYMT_TEST_MODEL names none

test_browser.py runs take() into a folder of its own, so the script stays in working order."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
SIZES = {"1280x800": (1280, 800), "390x844": (390, 844)}
# A page as someone leaves it: languages picked, a text translated (the address carries both).
QUERY = "/?source=en&target=de&q=" + "The%20appliance%20translates%20this%20page%20offline.%20" * 3


def take(browser, url: str, out: Path) -> list[Path]:
    """The four screenshots of the page at url, into out; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    made = []
    for size, (width, height) in SIZES.items():
        for theme in ("light", "dark"):
            context = browser.new_context(
                viewport={"width": width, "height": height}, color_scheme=theme, is_mobile=width < 720, locale="en-US"
            )
            page = context.new_page()
            page.goto(url + QUERY)
            page.wait_for_function(
                "document.querySelector('#output').textContent.length > 0 && "
                "!document.querySelector('#translate').disabled && "
                "document.querySelector('#status').textContent.startsWith('Ready')",
                timeout=120_000,
            )
            path = out / f"page-{size}-{theme}.png"
            page.evaluate("scrollTo(0, 0)")
            page.screenshot(path=str(path))
            made.append(path)
            context.close()
    return made


def main() -> None:
    tests = Path(__file__).resolve().parent
    sys.path.insert(0, str(tests))
    from playwright.sync_api import sync_playwright

    from browsers import CHROMIUM, FLAGS
    from hymt.testmodel import make_test_model
    from servers import serving

    with tempfile.TemporaryDirectory() as tmp:
        model = os.environ.get("HYMT_TEST_MODEL") or str(make_test_model(Path(tmp) / "model"))
        with serving(Path(model), Path(tmp) / "server.log") as srv, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
            for path in take(browser, srv.url, OUT):
                print(path.relative_to(OUT.parent.parent), path.stat().st_size, "bytes")
            browser.close()


if __name__ == "__main__":
    main()
