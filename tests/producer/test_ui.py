"""The web page without a browser: served, redirected to, under its CSP, files all there."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from litestar.testing import TestClient

from ocrq.producer.jobs.outputs import FORMATS
from ocrq.producer.ui import STATIC_DIR

REQUIRED_DIRECTIVES = (
    "default-src 'self'",
    "worker-src 'self' blob:",
    "img-src 'self' blob: data:",
    "connect-src 'self'",
)


# What would parse a string as markup: a result's text (the document's, untrusted) must
# only ever reach the page as textContent or as an attribute of an element made by script.
MARKUP_SINKS = ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "DOMParser")


class MenuFormats(HTMLParser):
    """The result formats the page's downloads menu offers (its buttons' data-format)."""

    def __init__(self) -> None:
        super().__init__()
        self.formats: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "button" and named.get("data-format"):
            self.formats.append(named["data-format"] or "")


class InlineCode(HTMLParser):
    """Collects what a CSP without 'unsafe-inline' would block: inline scripts, on* handlers."""

    def __init__(self) -> None:
        super().__init__()
        self.problems: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        self.problems += [f"<{tag} {name}>" for name in named if name.startswith("on")]
        if tag == "script":
            if not named.get("src"):
                self.problems.append("<script> without src")
            self.scripts.append(named.get("src") or "")
            self._in_script = True

    def handle_endtag(self, tag: str) -> None:
        self._in_script = self._in_script and tag != "script"

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.problems.append("inline script text")


def assert_csp(headers: Any) -> None:
    policy = headers.get("content-security-policy", "")
    for directive in REQUIRED_DIRECTIVES:
        assert directive in policy, (directive, policy)
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy


def test_the_page_is_served_at_ui_under_its_csp_with_no_inline_script(
    api: TestClient[Any],
) -> None:
    r = api.get("/ui")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    assert_csp(r.headers)
    parser = InlineCode()
    parser.feed(r.text)
    assert parser.problems == []
    assert parser.scripts == ["/static/ui/app.js"]


def test_the_root_redirects_to_the_page(api: TestClient[Any]) -> None:
    r = api.get("/", follow_redirects=False)
    assert r.status_code in (301, 302, 303, 307, 308)
    assert r.headers["location"] == "/ui"


def test_static_files_are_served_as_javascript_under_the_csp(api: TestClient[Any]) -> None:
    for path in (
        "/static/ui/app.js",
        "/static/ui/viewer.js",
        "/static/pdfjs/pdf.min.mjs",
        "/static/pdfjs/pdf.worker.min.mjs",
    ):
        r = api.get(path)
        assert r.status_code == 200, path
        # A module served as anything but JavaScript is refused by the browser.
        assert r.headers["content-type"].startswith("text/javascript"), (path, r.headers)
        assert r.headers["x-content-type-options"] == "nosniff"
        assert_csp(r.headers)
    css = api.get("/static/ui/app.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert api.get("/static/ui/nothing.js").status_code == 404


def test_every_module_the_page_imports_is_served(api: TestClient[Any]) -> None:
    ui = STATIC_DIR / "ui"
    for module in ui.glob("*.js"):
        for target in re.findall(r"""from\s+["'](\./[^"']+)["']""", module.read_text()):
            path = f"/static/ui/{Path(target).name}"
            assert api.get(path).status_code == 200, (module.name, target)
    pages = (ui / "pages.js").read_text()
    for url in re.findall(r'"(/static/pdfjs/[^"]+)"', pages):
        assert api.get(url).status_code == 200, url


def test_pdfjs_is_vendored_with_its_license_and_pinned_version() -> None:
    pdfjs = STATIC_DIR / "pdfjs"
    readme = (pdfjs / "README.md").read_text()
    version = re.search(r"pdfjs-dist@(\d+\.\d+\.\d+)", readme)
    assert version, readme
    assert f"pdfjs-dist@{version[1]}" in readme
    assert "Apache License" in (pdfjs / "LICENSE").read_text()
    # The build announces its own version: the README must name the one shipped.
    assert f'"{version[1]}"' in (pdfjs / "pdf.min.mjs").read_text()


def test_the_page_config_says_whether_to_ask_for_a_key(make_client: Any) -> None:
    assert make_client().get("/ui/config").json()["api_keys"] is False
    secured = make_client(api_keys="acme:key-acme")
    assert secured.get("/ui/config").json()["api_keys"] is True
    assert secured.get("/ui").status_code == 200  # the page itself needs no key


def test_the_api_and_swagger_keep_their_own_headers(api: TestClient[Any]) -> None:
    # Swagger UI runs inline scripts: the page's policy must not reach it.
    assert "content-security-policy" not in api.get("/schema/swagger").headers
    assert "content-security-policy" not in api.get("/healthz").headers


def test_no_module_parses_text_as_markup() -> None:
    for module in (STATIC_DIR / "ui").glob("*.js"):
        code = module.read_text()
        assert [sink for sink in MARKUP_SINKS if sink in code] == [], module.name


def test_the_downloads_menu_offers_every_result_format_the_api_serves(
    api: TestClient[Any],
) -> None:
    menu = MenuFormats()
    menu.feed(api.get("/ui").text)
    assert sorted(menu.formats) == sorted(FORMATS)
