"""A reader's session in `make lab`, in headless Chromium: the index first, then a lesson's
.py opened from the file browser, every cell run, saved as a pair."""

import re
import time

import jupytext
import nbformat
import psutil
from jupytext.config import load_jupytext_config

from tests.browser.conftest import get

LESSON = ("en", "02-computing-devices.py")


def menu(page, name: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{name}$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{item}$")).click()


def test_the_server_wants_its_token_listens_on_loopback_and_serves_notebooks_only(lab):
    base, token, _ = lab
    assert get(f"{base}/api/contents/README.md") == 403, "a request without the token was served"
    assert get(f"{base}/api/contents/README.md", token) == 200
    assert get(f"{base}/api/contents/Makefile", token) == 404, "the repository root is served"
    port = int(base.rsplit(":", 1)[1])
    listening = {c.laddr.ip for c in psutil.net_connections("inet") if c.laddr.port == port}
    assert listening == {"127.0.0.1"}, f"listening on {listening}"


def test_a_lesson_opens_runs_and_saves_as_a_pair(lab, browser):
    base, token, root = lab
    script = root.joinpath(*LESSON)
    notebook = script.with_suffix(".ipynb")
    source = script.read_text(encoding="utf-8")
    written = [p.stat().st_mtime_ns for p in (script, notebook)]
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(60_000)
    page.goto(f"{base}/?token={token}")  # where `make lab` opens the browser
    page.locator(".jp-MarkdownViewer .jp-RenderedMarkdown").first.wait_for()  # the index
    for name in LESSON:  # down the file browser, as a reader goes
        item = page.locator(".jp-DirListing-itemText", has_text=re.compile(f"^{name}$"))
        item.dblclick()
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    panel.locator(".jp-OutputArea-output").first.wait_for()  # the stored outputs
    status = panel.locator(".jp-Notebook-ExecutionIndicator")
    page.wait_for_function(
        "() => document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) "
        ".jp-Notebook-ExecutionIndicator')?.dataset.status === 'idle'"
    )
    assert page.locator(".jp-Dialog").count() == 0, "a dialog asked something"
    panel.locator(".jp-Notebook").click()
    menu(page, "Edit", "Clear Outputs of All Cells")  # so the counts below are this run's
    menu(page, "Run", "Run All Cells")
    # Done when the notebook has been idle for 3 s (cells off screen are not drawn, so
    # their prompts cannot be read); the saved file shows whether every cell ran.
    deadline, idle_since = time.monotonic() + 120, None
    while time.monotonic() < deadline:
        if status.get_attribute("data-status") != "idle":
            idle_since = None
        elif time.monotonic() - (idle_since := idle_since or time.monotonic()) > 3:
            break
        time.sleep(0.5)
    page.keyboard.press("Control+s")
    page.wait_for_function(
        "() => !document.querySelector('#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current')"
        ".classList.contains('jp-mod-dirty')"
    )

    now = [p.stat().st_mtime_ns for p in (script, notebook)]
    assert all(a != b for a, b in zip(now, written, strict=True)), "the pair was not saved"
    assert script.read_text(encoding="utf-8") == source, "saving changed the .py"
    saved = nbformat.read(notebook, as_version=4)
    config = load_jupytext_config(str(script.parent))
    assert jupytext.writes(saved, fmt="py:percent", config=config) == source, "the pair differs"
    code = [c for c in saved.cells if c.cell_type == "code"]
    counts = [c.execution_count for c in code]
    assert None not in counts and counts == sorted(counts), f"not every cell ran: {counts}"
    errors = [o.ename for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, f"error outputs after Run All: {errors}"
