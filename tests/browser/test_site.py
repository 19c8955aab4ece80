"""The site `make site` builds, read in headless Chromium as a reader reads it: from the index to
lesson 04 and its figure, over to the same lesson in Chinese, a search in Chinese; and nothing
the pages need (scripts, stylesheets, fonts) comes from anywhere but the site."""

import os
import re

import nbformat
import pytest
from playwright.sync_api import sync_playwright

from tests.browser.conftest import ARGS, CHROMIUM, REPOSITORY

LESSON = "04-asynchrony-and-transfers"
BADGE = re.compile(r"\]\((https://colab\.research\.google\.com/github/[^)]+)\)")


def test_a_reader_goes_from_the_index_to_a_lesson_its_twin_and_a_search_in_chinese(site):
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"no {CHROMIUM}: sudo apt-get install chromium", pytrace=False)
    root = site.as_uri()
    lesson = nbformat.read(REPOSITORY / "notebooks" / "en" / f"{LESSON}.ipynb", as_version=4)
    requests = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(locale="en-US", viewport={"width": 1280, "height": 900})
        page.set_default_timeout(30_000)
        page.on("request", lambda request: requests.append(request))
        page.route(re.compile(r"^(?!file:)"), lambda route: route.abort())  # the test stays here

        page.goto(f"{root}/index.html")
        page.wait_for_url(f"{root}/en/index.html")  # the browser asks for English
        page.locator("article a", has_text=re.compile(r"^04 ")).click()
        page.wait_for_url(f"{root}/en/{LESSON}.html")
        colab = page.get_by_role("link", name="Open in Colab").get_attribute("href")
        assert colab == BADGE.search(lesson.cells[0].source)[1], "not the lesson's badge address"
        assert page.locator("a[download][href$='.ipynb']").count() == 1, "no .ipynb to download"
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
        page.goto(f"{root}/zh/search.html?q=锁页内存")  # a glossary term, whole (jieba splits it)
        found["锁页内存"] = _results(page)
        browser.close()

    for words, lesson in (("显存", "08-gpu-memory"), ("锁页内存", "04-asynchrony-and-transfers")):
        assert any(href.startswith(f"{lesson}.html") for href in found[words]), found
    needed = [r for r in requests if r.resource_type in ("script", "stylesheet", "font")]
    elsewhere = [f"{r.resource_type} {r.url}" for r in needed if not r.url.startswith(f"{root}/")]
    assert needed and not elsewhere, f"the site loads from elsewhere: {elsewhere}"


def _results(page) -> list[str]:
    summary = page.locator("#search-results .search-summary")
    page.wait_for_function("s => s.textContent.trim() !== ''", arg=summary.element_handle())
    return [a.get_attribute("href") for a in page.locator("#search-results li a").all()]
