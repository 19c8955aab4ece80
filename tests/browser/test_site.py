"""The site `make site` builds, read in headless Chromium as a reader reads it: from the index to
lesson 04 and its figure, over to the same lesson in Chinese, a search in Chinese; and nothing
the pages need (scripts, stylesheets, fonts) comes from anywhere but the site. Then served under
/d2l-gpu/ as GitHub Pages serves it: on a phone, in dark mode, an English search, a code cell's
copy button, and axe-core's accessibility rules."""

import re

import nbformat
import pytest
from axe_playwright_python.sync_playwright import Axe

from tests.browser.conftest import REPOSITORY

LESSON = "04-asynchrony-and-transfers"
BADGE = re.compile(r"\]\((https://colab\.research\.google\.com/github/[^)]+)\)")


def test_a_reader_goes_from_the_index_to_a_lesson_its_twin_and_a_search_in_chinese(site, browser):
    root = site.as_uri()
    lesson = nbformat.read(REPOSITORY / "notebooks" / "en" / f"{LESSON}.ipynb", as_version=4)
    requests = []
    page = _read(browser, f"{root}/index.html", requests)
    page.wait_for_url(f"{root}/en/index.html")  # the browser asks for English
    page.locator("article a", has_text=re.compile(r"^04 ")).click()
    page.wait_for_url(f"{root}/en/{LESSON}.html")
    colab = page.get_by_role("link", name="Open in Colab").get_attribute("href")
    assert colab == BADGE.search(lesson.cells[0].source)[1], "not the lesson's badge address"
    assert page.locator("a[download][href$='.ipynb']").count() == 1, "no .ipynb to download"
    assert "d2l-gpu contributors" in page.locator(".bd-footer-content").inner_text()
    figures = page.locator(".cell_output img")
    assert figures.count() >= 1, "lesson 04 shows no figure"
    for figure in figures.all():
        figure.scroll_into_view_if_needed()
        page.wait_for_function("img => img.complete", arg=figure.element_handle())
        assert figure.evaluate("img => img.naturalWidth") > 0, "a figure did not load"

    page.locator("a[lang=zh]:visible").click()  # the same lesson in Chinese
    page.wait_for_url(f"{root}/zh/{LESSON}.html")
    assert page.locator("html").get_attribute("lang") == "zh-CN"
    page.locator("button.search-button-field").first.click()
    page.keyboard.type("显存")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/zh/search\.html\?q="))
    found = {"显存": _results(page)}
    status = page.locator("#search-results .search-summary").inner_text()
    assert not re.search("[A-Za-z]", status), f"not in Chinese: {status}"
    page.goto(f"{root}/zh/search.html?q=锁页内存")  # a glossary term, whole (jieba splits it)
    found["锁页内存"] = _results(page)

    for words, lesson in (("显存", "08-gpu-memory"), ("锁页内存", "04-asynchrony-and-transfers")):
        assert any(href.startswith(f"{lesson}.html") for href in found[words]), found
    needed = [r for r in requests if r.resource_type in ("script", "stylesheet", "font")]
    elsewhere = [f"{r.resource_type} {r.url}" for r in needed if not r.url.startswith(f"{root}/")]
    assert needed and not elsewhere, f"the site loads from elsewhere: {elsewhere}"


def _results(page) -> list[str]:
    summary = page.locator("#search-results .search-summary")
    page.wait_for_function("s => s.textContent.trim() !== ''", arg=summary.element_handle())
    return [a.get_attribute("href") for a in page.locator("#search-results li a").all()]


PHONE = {"width": 390, "height": 844}
CONTRAST = """a => {  // WCAG's contrast ratio of a link's text on the opaque background behind it
  const lit = (c) => c.match(/[\\d.]+/g).slice(0, 3).map((v) => v / 255)
    .map((v) => (v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4))
    .reduce((sum, v, i) => sum + [0.2126, 0.7152, 0.0722][i] * v, 0);
  let back = a;
  while (getComputedStyle(back).backgroundColor.endsWith(", 0)")) back = back.parentElement;
  const [high, low] = [lit(getComputedStyle(a).color), lit(getComputedStyle(back).backgroundColor)]
    .sort((x, y) => y - x);
  return (high + 0.05) / (low + 0.05);
}"""


def _read(browser, url: str, requests: list | None = None, **options):
    """`url` in a new page that reaches nothing but the site (file:// or its server)."""
    page = browser.new_page(
        **{"locale": "en-US", "viewport": {"width": 1280, "height": 900}, **options}
    )
    page.set_default_timeout(30_000)
    if requests is not None:  # what the page asks for, kept for the test
        page.on("request", lambda request: requests.append(request))
    site = re.match(r"file:|http://[^/]+/", url)[0]
    page.route(lambda address: not address.startswith(site), lambda route: route.abort())
    page.goto(url)
    # Bootstrap's .btn and links fade colour (0.15 s) once the theme's script sets its mode:
    # checks read what a reader is left with, not a frame of the fade (1.23:1 seen in CI).
    page.evaluate("() => Promise.all(document.getAnimations().map((a) => a.finished))")
    return page


def test_on_a_phone_the_buttons_open_the_lessons_and_the_headings_and_the_other_language(
    browser, served
):
    page = _read(browser, f"{served}/en/{LESSON}.html", viewport=PHONE)
    page.locator("button.primary-toggle:visible").click()
    lessons = page.locator("#pst-primary-sidebar-modal[open] a", has_text=re.compile(r"^\d\d · "))
    lessons.first.wait_for()
    assert lessons.count() == 13 and all(a.is_visible() for a in lessons.all())
    page.keyboard.press("Escape")
    page.locator("button.secondary-toggle:visible").click()
    headings = page.locator("#pst-secondary-sidebar-modal[open] nav.page-toc a")
    headings.first.wait_for()
    assert headings.count() >= 3
    page.keyboard.press("Escape")
    page.locator("a[lang=zh]:visible").click()  # reachable without scrolling or a menu
    page.wait_for_url(f"{served}/zh/{LESSON}.html")
    page.set_viewport_size({"width": 1280, "height": 900})  # on a desktop it hides the sidebar
    sidebar = page.locator("#pst-primary-sidebar")
    assert sidebar.is_visible()
    page.locator("button.primary-toggle:visible").click()
    page.wait_for_function(
        "s => s.getBoundingClientRect().right <= 0 || !s.checkVisibility()",
        arg=sidebar.element_handle(),
    )


def test_in_dark_mode_every_link_the_language_link_too_reads_at_4_5_to_1(browser, served):
    page = _read(browser, f"{served}/en/{LESSON}.html", color_scheme="dark")
    assert page.locator("html").get_attribute("data-theme") == "dark"
    language = page.locator("a[lang=zh]:visible").evaluate(CONTRAST)
    low = {a.inner_text(): a.evaluate(CONTRAST) for a in page.locator("a:visible").all()}
    low = {text: round(ratio, 2) for text, ratio in low.items() if ratio < 4.5}
    assert language >= 4.5 and not low, f"中文 at {language:.2f}:1; below 4.5:1: {low}"


def test_an_english_search_leads_to_the_lesson_with_its_text_as_the_preview(browser, served):
    page = _read(browser, f"{served}/en/search.html?q=pin_memory")
    hrefs = _results(page)
    results = page.locator("#search-results li")
    items = "[...document.querySelectorAll('#search-results li')]"
    page.wait_for_function(f"{items}.every((li) => li.querySelector('p'))")  # fetched previews
    assert hrefs[0].startswith(f"{LESSON}.html"), hrefs
    previews = [p.inner_text() for p in results.locator("p.context").all()]
    theirs = re.compile(r"System Settings|Light\s*Dark|Contents")  # the theme's controls
    assert previews and not any(theirs.search(p) for p in previews), previews


def test_a_code_cell_copies_its_code(browser, served):
    page = _read(browser, f"{served}/en/{LESSON}.html")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    cell = page.locator(".cell_input").nth(1)
    cell.hover()
    cell.locator("button.copybtn").click()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.strip() == cell.locator("pre").inner_text().strip()


@pytest.mark.parametrize("path", ["en/index.html", f"en/{LESSON}.html", f"zh/{LESSON}.html"])
def test_axe_finds_nothing_serious(browser, served, path):
    page = _read(browser, f"{served}/{path}")
    page.wait_for_load_state("load")
    found = Axe().run(page).response["violations"]
    serious = [(v["id"], v["impact"]) for v in found if v["impact"] in ("serious", "critical")]
    assert not serious, f"{path}: {serious}"
