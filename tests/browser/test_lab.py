"""A reader's session in JupyterLab, in headless Chromium: open a lesson's .py from
the file browser, run every cell, save, and check the pair written to disk."""

import os
import re
import shutil
import time
from pathlib import Path, PurePosixPath

import jupytext
import nbformat
from jupytext.config import load_jupytext_configuration_file
from playwright.sync_api import Locator, Page, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

# Short and quick; D2L_BROWSER_LESSON picks another (a path under notebooks/).
LESSON = PurePosixPath(os.environ.get("D2L_BROWSER_LESSON", "en/02-computing-devices.py"))
TIMEOUT_MS = 60_000
RUN_TIMEOUT_S = 120
CHROMIUM_ARGS = ["--disable-dev-shm-usage", "--disable-gpu"]
if os.geteuid() == 0:  # Chromium's sandbox refuses root, which is how CI runs
    CHROMIUM_ARGS.append("--no-sandbox")
REPOSITORY = Path(__file__).resolve().parents[2]
LESSON_NOTEBOOK = re.compile(r"\d\d-[a-z0-9-]+\.ipynb")


def _exact(text: str) -> re.Pattern:
    return re.compile(rf"^\s*{re.escape(text)}\s*$")


def _no_dialog(page: Page, moment: str) -> None:
    dialogs = page.locator(".jp-Dialog")
    assert dialogs.count() == 0, f"a dialog is open {moment}: {dialogs.first.inner_text()!r}"
    news = page.locator(".Toastify__toast", has_text=re.compile("news", re.I))
    assert news.count() == 0, f"a news pop-up is shown {moment}: {news.first.inner_text()!r}"


def _current_tab(page: Page) -> Locator:
    return page.locator("#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel")


def _index_is_shown_first(page: Page) -> None:
    page.locator(".jp-MarkdownViewer .jp-RenderedMarkdown").first.wait_for()
    assert _current_tab(page).inner_text().strip() == "README.md"


def _double_click_in_file_browser(page: Page, name: str) -> None:
    if not page.locator(".jp-DirListing").is_visible():
        page.locator('.lm-TabBar-tab[data-id="filebrowser"]').click()
    item = page.locator(".jp-DirListing-item").filter(
        has=page.locator(".jp-DirListing-itemText", has_text=_exact(name))
    )
    item.dblclick()


def _listed_names(page: Page) -> list[str]:
    return [n.strip() for n in page.locator(".jp-DirListing-itemText").all_inner_texts()]


def _open_lesson(page: Page) -> Locator:
    """Double-click down to the lesson; return its notebook panel once its kernel is idle."""
    for folder in LESSON.parent.parts:
        _double_click_in_file_browser(page, folder)
        page.locator(".jp-BreadCrumbs").get_by_text(folder, exact=True).wait_for()
    page.locator(".jp-DirListing-itemText", has_text=_exact(LESSON.name)).wait_for()
    names = _listed_names(page)
    assert not [n for n in names if LESSON_NOTEBOOK.fullmatch(n)], (
        f"each lesson should be listed once, as its .py: {names}"
    )
    _double_click_in_file_browser(page, LESSON.name)

    page.wait_for_function(
        "name => [...document.querySelectorAll("
        "'#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel')]"
        ".some(e => e.textContent.trim() === name)",
        arg=LESSON.name,
    )
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    assert panel.count() == 1, f"{LESSON.name} did not open as a notebook"
    panel.locator(".jp-Notebook .jp-Cell").first.wait_for()
    try:
        panel.locator(".jp-OutputArea-output").first.wait_for()
    except PlaywrightTimeout:
        raise AssertionError(f"{LESSON.name} opened without its stored outputs") from None

    deadline = time.monotonic() + TIMEOUT_MS / 1000
    kernel = panel.locator(".jp-Toolbar-kernelName")
    status = panel.locator(".jp-Notebook-ExecutionIndicator")
    while time.monotonic() < deadline:
        _no_dialog(page, f"after opening {LESSON.name}")
        if "Python" in kernel.inner_text() and status.get_attribute("data-status") == "idle":
            return panel
        time.sleep(0.5)
    raise AssertionError(f"no Python kernel became idle: {kernel.inner_text()!r}")


def _menu(page: Page, menu: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=_exact(menu)).click()
    page.locator(".lm-Menu-itemLabel", has_text=_exact(item)).click()


def _run_all(page: Page, panel: Locator) -> None:
    """Clear the stored outputs, then Run All Cells, and wait until none is queued."""
    panel.locator(".jp-Notebook").click()
    _menu(page, "Edit", "Clear Outputs of All Cells")
    prompts = panel.locator(".jp-CodeCell .jp-InputPrompt")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) "
        ".jp-CodeCell .jp-InputPrompt')].every(e => !/\\d/.test(e.textContent))"
    )
    _menu(page, "Run", "Run All Cells")
    deadline = time.monotonic() + RUN_TIMEOUT_S
    status = panel.locator(".jp-Notebook-ExecutionIndicator")
    started = False
    while time.monotonic() < deadline:
        texts = prompts.all_inner_texts()
        started = started or any(re.search(r"[*\d]", t) for t in texts)
        idle = status.get_attribute("data-status") == "idle"
        if started and idle and not any("*" in t for t in texts):
            return  # cells left blank (a stop on error) are reported from the saved file
        time.sleep(0.5)
    raise AssertionError(f"the cells were still running after {RUN_TIMEOUT_S} s")


def _save(page: Page, panel: Locator, files: list[Path]) -> None:
    """Save with Ctrl+S, as a reader does; both files of the pair must be written."""
    before = [f.stat().st_mtime_ns for f in files]
    panel.locator(".jp-Notebook").click()
    page.keyboard.press("Control+s")
    page.wait_for_function(
        "() => !document.querySelector('#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current')"
        ".classList.contains('jp-mod-dirty')"
    )
    written = [f.name for f, t in zip(files, before, strict=True) if f.stat().st_mtime_ns != t]
    assert written == [f.name for f in files], f"saving wrote only {written}"


def _check_saved_pair(script: Path, stored: Path, original_script: str) -> None:
    text = script.read_text(encoding="utf-8")
    assert text == original_script, "saving changed the .py (metadata noise or a lost edit)"
    notebook = nbformat.read(stored, as_version=4)
    config = load_jupytext_configuration_file(str(REPOSITORY / "notebooks" / "jupytext.toml"))
    converted = jupytext.writes(notebook, fmt="py:percent", config=config)
    assert converted == text, "the saved .ipynb and .py differ"

    code = [c for c in notebook.cells if c.cell_type == "code"]
    # Lessons show errors as printed text (try/except), so no output is an error.
    errors = [
        f"cell {i}: {o.ename}: {o.evalue}"
        for i, c in enumerate(code)
        for o in c.outputs
        if o.output_type == "error"
    ]
    counts = [c.execution_count for c in code]
    not_run = [i for i, n in enumerate(counts) if n is None]
    assert not not_run, f"code cells {not_run} did not run (counts {counts}; errors {errors})"
    assert counts == sorted(counts), f"cells ran out of order: {counts}"
    assert not errors, f"error outputs after Run All: {errors}"
    assert any(c.outputs for c in code), "Run All produced no output at all"


def test_a_lesson_opens_from_its_py_runs_and_saves_as_a_pair(chromium, lab, tmp_path):
    script = lab.root / LESSON
    stored = script.with_suffix(".ipynb")
    original_script = script.read_text(encoding="utf-8")
    screenshot = tmp_path / "lesson.png"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium, headless=True, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(lab.url)
            _index_is_shown_first(page)
            panel = _open_lesson(page)
            _run_all(page, panel)
            _no_dialog(page, "after Run All")
            _save(page, panel, [script, stored])
            _no_dialog(page, "after saving")
            page.screenshot(path=screenshot)
        except Exception:
            page.screenshot(path=tmp_path / "failure.png")
            raise
        finally:
            browser.close()
    if copy_to := os.environ.get("D2L_BROWSER_SCREENSHOT"):
        shutil.copyfile(screenshot, copy_to)
    _check_saved_pair(script, stored, original_script)
