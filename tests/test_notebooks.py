"""Every notebook is a consistent pair, a twin across languages, and points at this repository.

Covers whatever lies in notebooks/<lang>/, so notebooks added later are checked too.
"""

import re
from pathlib import Path

import pytest

from tests.repository import (
    LANGUAGES,
    LESSON_SOURCES,
    NOTEBOOKS,
    ROOT,
    TOOL,
    notebooks_changes,
    notebooks_snapshot,
)

# A GPU machine without Jupyter (make gpu-check) still collects the rest of the suite.
_WHY = "the notebook checks read notebooks with {} (make setup installs it)"
jupytext = pytest.importorskip("jupytext", reason=_WHY.format("jupytext"))
nbformat = pytest.importorskip("nbformat", reason=_WHY.format("nbformat"))
load_jupytext_config = pytest.importorskip("jupytext.config").load_jupytext_config

STORED = sorted(NOTEBOOKS.glob("*/*.ipynb"))
NAMES = sorted({p.stem for p in LESSON_SOURCES + STORED})


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _config():
    return load_jupytext_config(str(NOTEBOOKS / LANGUAGES[0]))


def _cells(notebook) -> list[tuple[str, str, list[str]]]:
    return [(c.cell_type, c.source, list(c.metadata.get("tags", []))) for c in notebook.cells]


def _read_source(path: Path):
    return jupytext.read(path, config=_config())


def _read_stored(path: Path):
    return nbformat.read(path, as_version=4)


def test_notebooks_exist():
    assert LESSON_SOURCES, "notebooks/<lang>/ holds no .py notebook sources"
    assert {p.parent.name for p in LESSON_SOURCES + STORED} <= set(LANGUAGES), (
        f"notebooks live in notebooks/{{{','.join(LANGUAGES)}}}/ only"
    )


@pytest.mark.parametrize("path", LESSON_SOURCES + STORED, ids=_rel)
def test_every_file_has_its_pair(path):
    partner = path.with_suffix(".ipynb" if path.suffix == ".py" else ".py")
    assert partner.is_file(), (
        f"{_rel(path)} has no paired {partner.suffix}: run "
        f"`python .ci/execute_notebooks.py {_rel(path.with_suffix('.py'))}`"
    )


@pytest.mark.parametrize("path", LESSON_SOURCES, ids=_rel)
def test_file_names_are_ascii_and_numbered(path):
    assert re.fullmatch(r"\d\d-[a-z0-9-]+\.py", path.name), (
        f"{path.name}: expected NN-slug.py in lower-case ASCII"
    )


@pytest.mark.parametrize(
    "path", [p for p in LESSON_SOURCES if p.with_suffix(".ipynb").is_file()], ids=_rel
)
def test_pair_has_the_same_content(path):
    """Compare content, never file times (a git clone sets those at random)."""
    source, stored = _read_source(path), _read_stored(path.with_suffix(".ipynb"))
    assert _cells(stored) == _cells(source), (
        f"{_rel(path)} and its .ipynb differ: re-run `python .ci/execute_notebooks.py {_rel(path)}`"
    )
    # Writing the .ipynb back as a script must give the .py byte for byte, so
    # `jupytext --sync` has nothing to change in either file.
    assert jupytext.writes(stored, fmt="py:percent", config=_config()) == path.read_text(
        encoding="utf-8"
    )


@pytest.mark.parametrize("path", STORED, ids=_rel)
def test_stored_notebook_was_executed_reproducibly(path):
    notebook = _read_stored(path)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    counts = [c.execution_count for c in code]
    assert counts == list(range(1, len(code) + 1)), (
        f"{_rel(path)}: code cells must carry the outputs of one run, top to bottom"
    )
    assert notebook.metadata.get("kernelspec", {}).get("name") == "python3"
    for cell in notebook.cells:
        assert "execution" not in cell.metadata, f"{_rel(path)}: timing metadata stored"
        assert set(cell.metadata) <= {"tags"}, f"{_rel(path)}: unfiltered cell metadata"
        for output in cell.get("outputs", []):
            text = "".join(output.get("traceback", []))
            assert str(ROOT) not in text, f"{_rel(path)}: a traceback names this machine's folders"


@pytest.mark.parametrize("name", NAMES)
def test_both_languages_have_identical_code(name):
    paths = {lang: NOTEBOOKS / lang / f"{name}.py" for lang in LANGUAGES}
    missing = [_rel(p) for p in paths.values() if not p.is_file()]
    assert not missing, f"{name} lacks its twin: {', '.join(missing)}"
    code = {
        lang: [cell for cell in _cells(_read_source(p)) if cell[0] == "code"]
        for lang, p in paths.items()
    }
    en, zh = code["en"], code["zh"]
    assert len(en) == len(zh), f"{name}: {len(en)} code cells in en, {len(zh)} in zh"
    for i, (a, b) in enumerate(zip(en, zh, strict=True)):
        assert a == b, f"{name}: code cell {i} differs between en and zh"


def _badge(lang: str, name: str) -> str:
    target = (
        f"https://colab.research.google.com/github/{TOOL['repository']}/blob/{TOOL['branch']}"
        f"/notebooks/{lang}/{name}.ipynb"
    )
    return f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({target})"


@pytest.mark.parametrize("path", LESSON_SOURCES, ids=_rel)
def test_title_badge_and_setup_cell(path):
    cells = _read_source(path).cells
    assert cells[0].cell_type == "markdown" and cells[0].source.startswith("# "), (
        f"{_rel(path)}: the first cell is a markdown title"
    )
    assert _badge(path.parent.name, path.stem) in cells[0].source.splitlines(), (
        f"{_rel(path)}: the Colab badge must read {_badge(path.parent.name, path.stem)}"
    )
    setup = cells[1]
    install = f"git+https://github.com/{TOOL['repository']}"
    assert setup.cell_type == "code" and install in setup.source, (
        f"{_rel(path)}: the second cell is the setup cell, installing {install} on Colab"
    )
    assert setup.metadata.get("tags") == ["nbval-ignore-output"]
    assert "--no-deps" in setup.source, "the Colab install must keep Colab's own torch"


def test_setup_cell_is_the_same_everywhere():
    setups = {_rel(p): _read_source(p).cells[1].source for p in LESSON_SOURCES}
    assert len(set(setups.values())) == 1, "setup cells differ: " + ", ".join(sorted(setups))


@pytest.mark.parametrize("path", LESSON_SOURCES, ids=_rel)
def test_links_point_at_this_repository(path):
    text = path.read_text(encoding="utf-8")
    repo = re.escape(TOOL["repository"])
    for url in re.findall(r"https://colab\.research\.google\.com/github/\S+?\.ipynb", text):
        assert re.fullmatch(
            rf"https://colab\.research\.google\.com/github/{repo}/blob/{TOOL['branch']}/"
            rf"notebooks/(?:{'|'.join(LANGUAGES)})/\d\d-[a-z0-9-]+\.ipynb",
            url,
        ), f"{_rel(path)}: {url} is not a Colab link into {TOOL['repository']}"
    for url in re.findall(r"git\+https://github\.com/[^\s\"']+", text):
        assert url == f"git+https://github.com/{TOOL['repository']}", f"{_rel(path)}: {url}"
    for target in re.findall(r"\]\((\d\d-[a-z0-9-]+\.ipynb)\)", text):
        assert (path.parent / target).with_suffix(".py").is_file(), (
            f"{_rel(path)} links to {target}, which does not exist"
        )


# Calls that create files. A notebook using one must work in a temporary folder.
_WRITES = re.compile(
    r"open\([^)]*['\"][wax]b?\+?['\"]|\.savefig\(|torch\.save\(|np\.save|\.write_(?:text|bytes)\("
    r"|\.to_csv\(|\.mkdir\(|os\.makedirs\("
)


@pytest.mark.parametrize("path", LESSON_SOURCES, ids=_rel)
def test_file_writes_go_to_a_temporary_folder(path):
    code = "\n".join(c.source for c in _read_source(path).cells if c.cell_type == "code")
    if _WRITES.search(code):
        assert "tempfile" in code, f"{_rel(path)} writes files but never uses tempfile"


def test_running_a_notebook_leaves_no_file_behind(tmp_path):
    """Run the introduction in a fresh kernel, in a copy, as nbval would."""
    from nbclient import NotebookClient

    source = NOTEBOOKS / "en" / "01-introduction.py"
    copy = tmp_path / source.name
    copy.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    before_repo, before_tmp = notebooks_snapshot(), sorted(tmp_path.iterdir())
    notebook = jupytext.read(copy, config=_config())
    NotebookClient(
        notebook, kernel_name="python3", timeout=60, resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    assert sorted(tmp_path.iterdir()) == before_tmp, "the notebook wrote into its own folder"
    assert not notebooks_changes(before_repo), "the notebook changed files under notebooks/"


def test_index_lists_every_notebook_with_its_colab_links():
    index = (NOTEBOOKS / "README.md").read_text(encoding="utf-8")
    for name in NAMES:
        for lang in LANGUAGES:
            badge = _badge(lang, name)
            assert f"]({lang}/{name}.ipynb)" in index and badge.split("](", 1)[1] in index, (
                f"notebooks/README.md does not list {lang}/{name} with its Colab link"
            )
    listed = re.findall(r"\]\((?:en|zh)/(\d\d)-", index)
    assert listed == sorted(listed), "notebooks/README.md lists the notebooks out of order"


def _sync_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("sync_notebooks", ROOT / ".ci/sync_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sync_renders_the_address_from_pyproject():
    sync = _sync_script()
    text = (NOTEBOOKS / "zh" / "01-introduction.py").read_text(encoding="utf-8")
    moved = sync.render(text, "someone/fork", "dev")
    assert TOOL["repository"] not in moved
    assert "github/someone/fork/blob/dev/notebooks/zh/01-introduction.ipynb" in moved
    assert 'git+https://github.com/someone/fork"' in moved
    assert sync.render(moved, TOOL["repository"], TOOL["branch"]) == text
    assert sync.main(["--check"]) == 0, "run `python .ci/sync_notebooks.py`"


# Rules for what the notebooks say and store (issue 9).


def _index_titles() -> dict[str, str]:
    index = (NOTEBOOKS / "README.md").read_text(encoding="utf-8")
    return {
        f"{lang}/{name}": title
        for title, lang, name in re.findall(
            r"\[([^\]]+)\]\((en|zh)/(\d\d-[a-z0-9-]+)\.ipynb\)", index
        )
    }


@pytest.mark.parametrize("path", LESSON_SOURCES, ids=_rel)
def test_title_matches_the_index(path):
    first = _read_source(path).cells[0].source.splitlines()[0]
    key = f"{path.parent.name}/{path.stem}"
    assert first == f"# {_index_titles().get(key)}", (
        f"{_rel(path)}: the title {first[2:]!r} differs from notebooks/README.md's "
        f"{_index_titles().get(key)!r}"
    )


@pytest.mark.parametrize("path", LESSON_SOURCES, ids=_rel)
def test_no_cell_is_meant_to_raise(path):
    """Every notebook runs as a plain script, so errors are caught and printed."""
    tagged = [
        i
        for i, cell in enumerate(_read_source(path).cells)
        if "raises-exception" in cell.metadata.get("tags", [])
    ]
    assert not tagged, f"{_rel(path)}: cells {tagged} are tagged raises-exception; use try/except"


def _output_texts(output) -> list[str]:
    texts = ["".join(output.get("traceback", [])), output.get("text", "")]
    for kind, value in output.get("data", {}).items():
        if kind.startswith("text/") or kind.endswith("json"):
            texts.append(value if isinstance(value, str) else "".join(value))
    return [t if isinstance(t, str) else "".join(t) for t in texts]


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_MACHINE_FOLDER = re.compile(r"(?<![\w.])(?:/work/|/home/|/tmp/|/root/|/Users/|[A-Z]:\\Users\\)")


@pytest.mark.parametrize("path", STORED, ids=_rel)
def test_stored_outputs_are_short_and_name_no_machine_folder(path):
    for i, cell in enumerate(_read_stored(path).cells):
        for output in cell.get("outputs", []):
            traceback = _ANSI.sub("", "\n".join(output.get("traceback", [])))
            assert len(traceback.splitlines()) <= 40, (
                f"{_rel(path)} cell {i}: a stored traceback of {len(traceback.splitlines())} lines"
            )
            for text in _output_texts(output):
                found = _MACHINE_FOLDER.search(_ANSI.sub("", text))
                assert found is None, f"{_rel(path)} cell {i}: output names a folder {found[0]!r}"


# Words the glossary (notebooks/zh/README.md) replaces: calques, and the second
# word of a pair where the glossary keeps one (误差棒 not 误差线, 本节 not 本章,
# 弗罗贝尼乌斯范数 not Frobenius 范数, 锁页内存中的批次 not 锁页批量, 预热 not 热身).
_CALQUES = re.compile(
    r"普通行|Python 数(?![值组据字])|中位时间|翻上|调度器|分派器|普通笔记本|误差线|本章"
    r"|Frobenius\s*范数|锁页批量|热身"
    r"|它所服务的计算|损失掉的是队列|成大块地搬运|结果永远是假"
)
_LONE_UNIT = re.compile(r"(?<!运算|计算)单元(?![格素]|测试)")
# A CPU core is 核心; 核 alone is kept for 核函数 and 内核 (and 核对, 核实, 核查, 核算).
_LONE_CORE = re.compile(r"(?<![内结])核(?![函心对实查算])")
_GPU_MEMORY = re.compile(r"(?:GPU|显卡)\s*(?:的|上的)?\s*内存")
# Half-width punctuation touching a Chinese character: Chinese prose takes ，；：！？（）.
_HALF_WIDTH = re.compile(r"[\u4e00-\u9fff][,;:!?()]|[,;:!?()][\u4e00-\u9fff]")
_INLINE_CODE = re.compile(r"`[^`]*`|\]\([^)]*\)")


def _zh_paragraphs(path: Path) -> list[str]:
    cells = [c.source for c in _read_source(path).cells if c.cell_type == "markdown"]
    return [p for text in cells for p in re.split(r"\n\s*\n", text)]


def _glossary_problems(paragraphs: list[str]) -> list[str]:
    problems = []
    for paragraph in paragraphs:
        prose = _INLINE_CODE.sub("", paragraph)
        where = repr(prose.strip()[:30])
        problems += [f"calque {m!r}" for m in _CALQUES.findall(prose)]
        problems += [f"单元 without 格 in {where}" for _ in _LONE_UNIT.findall(prose)]
        problems += [f"核 for a core (write 核心) in {where}" for _ in _LONE_CORE.findall(prose)]
        problems += [f"{m!r} for GPU memory (write 显存)" for m in _GPU_MEMORY.findall(prose)]
        problems += [f"half-width {m!r} in Chinese prose" for m in _HALF_WIDTH.findall(prose)]
        problems += [f"straight or corner quote in {where}" for q in '"「」' if q in prose]
        if "笔记本电脑" in prose and "笔记本" in prose.replace("笔记本电脑", ""):
            problems.append(f"笔记本 and 笔记本电脑 in one paragraph: {where}")
    return problems


@pytest.mark.parametrize("path", [p for p in LESSON_SOURCES if p.parent.name == "zh"], ids=_rel)
def test_chinese_prose_follows_the_glossary(path):
    """The rules of notebooks/zh/README.md that a machine can check."""
    problems = _glossary_problems(_zh_paragraphs(path))
    assert not problems, f"{_rel(path)}: " + "; ".join(problems)


@pytest.mark.parametrize("path", [p for p in LESSON_SOURCES if p.parent.name == "zh"], ids=_rel)
def test_chinese_lesson_says_at_its_start_that_outputs_are_in_english(path):
    first = next(c.source for c in _read_source(path).cells if c.cell_type == "markdown")
    assert "输出" in first and "英文" in first, f"{_rel(path)}: its first cell does not say so"


def _readme_chinese_section() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.partition("\n## 中文简介\n")[2].partition("\n## ")[0]
    assert section.strip(), "README.md has no '## 中文简介' section"
    return re.split(r"\n\s*\n", section)


def test_readme_chinese_section_follows_the_glossary():
    problems = _glossary_problems(_readme_chinese_section())
    assert not problems, "README.md, 中文简介: " + "; ".join(problems)


@pytest.mark.parametrize(
    "paragraph",
    [
        "它返回由数字组成的普通行。",
        "把它变成 Python 数。",
        "用它除以中位时间。",
        "每十年就翻上一千倍。",
        "再经过 PyTorch 的调度器。",
        "下一个单元会安装它。",
        '所谓"传输"只是一次复制。',
        "所谓「传输」只是一次复制。",
        "没有 GPU 的笔记本电脑也能运行这个笔记本。",
        "误差线从 q1 画到 q3。",
        "本章讲的是 GPU。",
        "记录每个乘积的 Frobenius 范数。",
        "记录每个乘积的Frobenius范数。",
        "DataLoader 交出锁页批量。",
        "先热身几次再计时。",
        "复制引擎服务于它所服务的计算。",
        "损失掉的是队列。",
        "把记录成大块地搬运。",
        "这个比较的结果永远是假。",
        "第二个核多快被唤醒。",
        "每次乘法只用一个核。",
        "张量放在 GPU 内存里。",
        "GPU 的内存不够了。",
        "没有 GPU,也能运行。",
        "结果是 (a) 最快:(b) 次之。",
        "见术语表(notebooks/zh)。",
    ],
)
def test_the_glossary_check_catches_each_rule(paragraph):
    assert _glossary_problems([paragraph])


def test_the_glossary_check_accepts_good_prose():
    good = '笔记本里的每个单元格都能运行；`"gpu"` 是代码。得到单元素张量里的 Python 数值和中位数。'
    units = "GPU 有成千上万个运算单元。"
    words = "本节的误差棒画出四分位距；两个 CPU 核心共用内存，GPU 有自己的显存。"
    terms = "预热之后，性能分析器记下每块调用；弗罗贝尼乌斯范数；锁页内存中的批次；meta 设备。"
    kernels = "启动一个核函数；Jupyter 内核重启后，核对输出（`a, b`）并核实结果：GPU (cuda) 可用。"
    laptop = "没有 GPU 的笔记本电脑也能跑。"
    assert _glossary_problems([good, units, words, terms, kernels, laptop]) == []


@pytest.mark.parametrize("text", ["/work/main/.venv/bin/python", "in /home/ada/x.py", "/tmp/abc"])
def test_the_folder_check_catches_machine_folders(text):
    assert _MACHINE_FOLDER.search(text)


def test_glossary_exists_and_names_each_checked_term():
    glossary = (NOTEBOOKS / "zh" / "README.md").read_text(encoding="utf-8")
    checked = ("笔记本电脑", "单元格", "核函数", "分发器", "中位数", "锁页内存", "显存", "误差棒")
    checked += ("弗罗贝尼乌斯范数", "锁页内存中的批次", "预热")
    others = ("核心", "本节", "驱动", "编号", "会合", "集合通信", "流", "性能分析器", "meta 设备")
    for term in (*checked, *others):
        assert term in glossary, f"notebooks/zh/README.md does not define {term}"


# One lesson, one sitting (issue 15): a size limit, an opening that says what the
# reader will learn and need, and a closing section that says what it showed.

MAX_CELLS = 36
MAX_PROSE_WORDS = 1600
OPENING = {
    "en": ("**What you will learn**", "**What you need**"),
    "zh": ("**你将学到**", "**你需要**"),
}
CLOSING = {"en": "## What this lesson showed", "zh": "## 本课小结"}
NEXT = {"en": "Next:", "zh": "下一篇："}
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
# Han characters, CJK and full-width punctuation: what separates words in Chinese.
_CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")


def _prose_words(text: str) -> float:
    """Words of prose: whitespace-separated words, plus half a word per Han character.

    Two Han characters carry about one English word (the en and zh twins of
    each lesson come out within about 15 % of each other this way). Link targets
    are not prose and are left out; the link text counts.
    """
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return len(_HAN.findall(text)) / 2 + len(_CJK.sub(" ", text).split())


def _markdown(path: Path) -> list[str]:
    return [c.source for c in _read_source(path).cells if c.cell_type == "markdown"]


# A comment starts a line or follows a space; a "#" inside a word ("Step#1") is no comment.
_COMMENT = re.compile(r"(?:^|\s)#\s?(.*)$", re.M)


def _comments(path: Path) -> list[str]:
    """The comments of the code cells: a reader reads them as prose too."""
    cells = [c.source for c in _read_source(path).cells if c.cell_type == "code"]
    return [text for source in cells for text in _comment_texts(source)]


def _comment_texts(source: str) -> list[str]:
    return [m[1] for m in _COMMENT.finditer(source)]


def test_comments_are_found_where_a_reader_sees_them():
    code = "# First line\nx = 1  # after code\nname = 'ProfilerStep#1'\n    # indented"
    assert _comment_texts(code) == ["First line", "after code", "indented"]


@pytest.mark.parametrize("path", LESSON_SOURCES, ids=_rel)
def test_lesson_fits_one_sitting(path):
    cells = _read_source(path).cells
    words = _prose_words("\n".join(_markdown(path) + _comments(path)))
    assert len(cells) <= MAX_CELLS, f"{_rel(path)}: {len(cells)} cells, at most {MAX_CELLS}"
    assert words <= MAX_PROSE_WORDS, (
        f"{_rel(path)}: {words:.0f} words of prose (markdown and code comments), "
        f"at most {MAX_PROSE_WORDS} (Chinese: two Han characters count as one word)"
    )


@pytest.mark.parametrize("path", LESSON_SOURCES, ids=_rel)
def test_lesson_opens_with_what_you_learn_and_need(path):
    first = _read_source(path).cells[0].source
    missing = [line for line in OPENING[path.parent.name] if line not in first.splitlines()]
    assert not missing, f"{_rel(path)}: the title cell lacks {', '.join(missing)}"


@pytest.mark.parametrize("path", LESSON_SOURCES, ids=_rel)
def test_lesson_ends_with_what_it_showed(path):
    last = _read_source(path).cells[-1]
    heading = CLOSING[path.parent.name]
    assert last.cell_type == "markdown" and last.source.startswith(heading + "\n"), (
        f"{_rel(path)}: the last cell must be markdown starting with {heading!r}"
    )


@pytest.mark.parametrize("path", LESSON_SOURCES, ids=_rel)
def test_next_link_points_at_the_following_lesson(path):
    """A "Next:" link at the end leads to the lesson numbered one higher."""
    last = _markdown(path)[-1]
    after = last.split(NEXT[path.parent.name], 1)
    if len(after) == 1:
        return
    target = re.match(r"\s*\[[^\]]+\]\((\d\d)-[a-z0-9-]+\.ipynb\)", after[1])
    assert target, f"{_rel(path)}: {NEXT[path.parent.name]} is not followed by a lesson link"
    assert int(target[1]) == int(path.name[:2]) + 1, (
        f"{_rel(path)}: {NEXT[path.parent.name]} leads to {target[1]}, "
        f"not to {int(path.name[:2]) + 1:02d}"
    )


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("Two words", 2),
        ("复制很慢", 2),
        ("用 `.to()` 复制，再相加。", 4),
        ("[03 – Tensors](03-tensors-and-gpus.ipynb) next", 4),
    ],
)
def test_prose_words_counts_english_words_and_half_han_characters(text, words):
    assert _prose_words(text) == words
