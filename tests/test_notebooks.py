"""The conventions every lesson keeps, checked by reading the files (nbval runs them).

A lesson is a pair in ``notebooks/<lang>/``: ``NN-slug.py`` (py:percent, the file people
edit) and ``NN-slug.ipynb`` (the same cells with the outputs of a CPU run). Whatever lies
in those folders is checked, so a new lesson is held to the same rules.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from pathlib import Path

import pytest

_WHY = "the lesson checks read notebooks with {} (make install brings it)"
jupytext = pytest.importorskip("jupytext", reason=_WHY.format("jupytext"))
nbformat = pytest.importorskip("nbformat", reason=_WHY.format("nbformat"))
from jupytext.config import load_jupytext_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
LANGUAGES = ("en", "zh")
# The repository's one address: every Colab badge, the setup cell's install and every
# link into the repository use it (a fork edits these two lines, then the files named).
REPOSITORY = "d2l-gpu/d2l-gpu"
BRANCH = "main"
COLAB = f"https://colab.research.google.com/github/{REPOSITORY}/blob/{BRANCH}/notebooks/"
LESSON_SOURCES = sorted(p for lang in LANGUAGES for p in (NOTEBOOKS / lang).glob("*.py"))
STORED = sorted(p for lang in LANGUAGES for p in (NOTEBOOKS / lang).glob("*.ipynb"))
ZH_SOURCES = [p for p in LESSON_SOURCES if p.parent.name == "zh"]
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", NOTEBOOKS / "README.md"]
DOCS += [NOTEBOOKS / "zh" / "README.md"]
CHAPTER_PATH = 7  # lessons 01-07 follow the book's §5.5; 08 on go beyond it

GPU_LINE = {
    "en": "What a GPU printed for these lessons: [notebooks/gpu](../gpu/README.md).",
    "zh": "这些课在 GPU 上打印的结果：[notebooks/gpu](../gpu/README.md)。",
}
GROUP = {"en": "Beyond the book", "zh": "拓展内容"}  # lessons 08 on, one name everywhere
BEYOND = {
    "en": f"*{GROUP['en']}: this lesson goes past the chapter.*",
    "zh": f"*{GROUP['zh']}：本课超出了原书本节的范围。*",
}
OPENING = {
    "en": ("**What you will learn**", "**What you need**"),
    "zh": ("**你将学到**", "**你需要**"),
}
CLOSING = {"en": "## What this lesson showed", "zh": "## 本课小结"}
# zh: a comma after the link, or the line break after it reads as a space
NEXT = {"en": "Next: [{}]({}.ipynb)", "zh": "下一课：[{}]({}.ipynb)，"}
BACK_TO_INDEX = {
    "en": "Next: back to the [index](../README.md).",
    "zh": "全部课程到此结束，回到[目录](../README.md)。",
}
TITLE_SHORT = {"en": ": ", "zh": "："}  # a Next link names the title up to this
# The second cell of every lesson, byte for byte.
_SETUP = """import sys

if "google.colab" in sys.modules:  # Colab: add d2l_gpu and keep Colab's own torch
    get_ipython().run_line_magic(
        "pip", "install --quiet --no-deps git+https://github.com/REPOSITORY"
    )

import torch

import d2l_gpu

torch.manual_seed(0)
print(f"torch {torch.__version__}, d2l_gpu {d2l_gpu.__version__}")
print("devices the helpers will use:", ", ".join(map(str, d2l_gpu.try_all_gpus())))
if d2l_gpu.num_gpus() == 0:
    print("No GPU found: every cell still runs on the CPU; the text says what a GPU shows.")
"""
SETUP = _SETUP.rstrip("\n").replace("REPOSITORY", REPOSITORY)
MAX_OUTPUT_LINES = 40


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _number(path: Path) -> int:
    return int(path.name[:2])


def _beyond(path: Path) -> bool:
    return _number(path) > CHAPTER_PATH


@functools.cache
def _read(path: Path):
    """The notebook a lesson's .py makes, as Jupytext reads it (cached: read-only use)."""
    return jupytext.read(path, config=load_jupytext_config(str(path.parent)))


@functools.cache
def _stored(path: Path):
    return nbformat.read(path, as_version=4)


def _code(path: Path) -> list[str]:
    return [c.source for c in _read(path).cells if c.cell_type == "code"]


def _markdown(path: Path) -> list[str]:
    return [c.source for c in _read(path).cells if c.cell_type == "markdown"]


def _badge(lang: str, name: str) -> str:
    image = "https://colab.research.google.com/assets/colab-badge.svg"
    return f"[![Open In Colab]({image})]({COLAB}{lang}/{name}.ipynb)"


def _index() -> str:
    return (NOTEBOOKS / "README.md").read_text(encoding="utf-8")


def _index_titles() -> dict[str, str]:
    """``{"en/01-introduction": "Introduction: ...", ...}`` from the index's rows."""
    found = re.findall(r"\[([^\]]+)\]\((en|zh)/(\d\d-[a-z0-9-]+)\.ipynb\)", _index())
    return {f"{lang}/{name}": title for title, lang, name in found}


# The files


def test_lessons_are_named_and_numbered_in_turn():
    names = sorted({p.stem for p in LESSON_SOURCES})
    assert names, "notebooks/en/ and notebooks/zh/ hold no lesson"
    problems = [f"{n}: not NN-slug in lower-case ASCII" for n in names
                if not re.fullmatch(r"\d\d-[a-z0-9]+(?:-[a-z0-9]+)*", n)]  # fmt: skip
    numbers = sorted({n[:2] for n in names})
    expected = [f"{i:02d}" for i in range(1, len(numbers) + 1)]
    if numbers != expected:
        problems.append(f"lessons are numbered {numbers}, not 01 to {len(numbers):02d} in turn")
    assert not problems, "; ".join(problems)


@pytest.mark.parametrize(
    "path", sorted({p.with_suffix(".py") for p in LESSON_SOURCES + STORED}), ids=_rel
)
def test_each_lesson_is_a_pair_with_the_same_content(path):
    """Content, never file times (a git clone sets those at random): written back as a script,
    the .ipynb gives the .py byte for byte, so both hold the same cells, tags and alt text."""
    for file in (path, path.with_suffix(".ipynb")):
        assert file.is_file(), f"{_rel(file)} is missing: a lesson is a .py with its .ipynb"
    stored = _stored(path.with_suffix(".ipynb"))
    config = load_jupytext_config(str(path.parent))
    assert jupytext.writes(stored, fmt="py:percent", config=config) == path.read_text(
        encoding="utf-8"
    ), f"{_rel(path)} and its .ipynb differ: `python tools/execute.py {_rel(path)}`, `make sync`"


# The title cell, the setup cell, the opening and the ending


@pytest.mark.parametrize("path", LESSON_SOURCES, ids=_rel)
def test_lesson_opens_with_its_title_cell_then_the_setup_cell(path):
    lang, name = path.parent.name, path.stem
    title = _index_titles().get(f"{lang}/{name}", "<not in notebooks/README.md>")
    expected = [f"# {title}", "", _badge(lang, name), "", GPU_LINE[lang]]
    expected += ["", BEYOND[lang]] if _beyond(path) else []
    lines = _read(path).cells[0].source.splitlines()
    for i, line in enumerate(expected):
        got = lines[i] if i < len(lines) else "<end of cell>"
        assert got == line, f"{_rel(path)}: title cell line {i + 1} is {got!r}, not {line!r}"
    missing = [line for line in OPENING[lang] if line not in lines]
    assert not missing, f"{_rel(path)}: the title cell lacks {', '.join(missing)}"
    english = "输出" in "".join(lines) and "英文" in "".join(lines)
    assert lang == "en" or english, f"{_rel(path)}: say once that code and output are English"
    if not _beyond(path):
        assert BEYOND[lang] not in path.read_text(encoding="utf-8"), (
            f"{_rel(path)}: lessons 01-{CHAPTER_PATH:02d} follow the book; no beyond-the-book mark"
        )
    setup = _read(path).cells[1]
    assert setup.cell_type == "code" and setup.source == SETUP, (
        f"{_rel(path)}: the second cell must be tests/test_notebooks.py's SETUP, byte for byte"
    )
    assert setup.metadata.get("tags") == ["nbval-ignore-output"], _rel(path)


@pytest.mark.parametrize("path", LESSON_SOURCES, ids=_rel)
def test_lesson_ends_with_what_it_showed_and_the_next_lesson(path):
    lang = path.parent.name
    last = _read(path).cells[-1]
    assert last.cell_type == "markdown" and last.source.startswith(CLOSING[lang] + "\n"), (
        f"{_rel(path)}: the last cell must be markdown starting with {CLOSING[lang]!r}"
    )
    final = re.split(r"\n\s*\n", last.source.strip())[-1]
    number = f"{_number(path) + 1:02d}"
    following = [(k, t) for k, t in _index_titles().items() if k.startswith(f"{lang}/{number}-")]
    if not following:  # the last lesson (the index test finds a lesson the index lacks)
        assert final == BACK_TO_INDEX[lang], (
            f"{_rel(path)}: the index lists no {lang} lesson {number}, so this one ends with "
            f"{BACK_TO_INDEX[lang]!r}, not {final!r}"
        )
        return
    ((key, title),) = following
    short = title.split(TITLE_SHORT[lang])[0]
    link = NEXT[lang].format(f"{number} – {short}", key[3:])
    assert final.startswith(link), (
        f"{_rel(path)}: the last paragraph must start {link!r}, not {final[:80]!r}"
    )


# What a reader reads: links, word caps


@pytest.mark.parametrize("path", LESSON_SOURCES + DOCS, ids=_rel)
def test_links_lead_somewhere_and_into_this_repository(path):
    assert path.is_file(), f"{_rel(path)} is missing"
    text = (
        "\n\n".join(_markdown(path)) if path.suffix == ".py" else path.read_text(encoding="utf-8")
    )
    problems = []
    for url in re.findall(r"https?://[^\s)\"'>\]]+", text):
        github = re.match(r"https://github\.com/([^/\s]+/[^/\s#]+)", url)
        if url.startswith("https://colab.research.google.com/github/"):
            found = re.fullmatch(re.escape(COLAB) + r"(en|zh)/(\d\d-[a-z0-9-]+)\.ipynb", url)
            if not found:
                problems.append(f"{url} is not a Colab link into {REPOSITORY} at {BRANCH}")
            elif not (NOTEBOOKS / found[1] / f"{found[2]}.py").is_file():
                problems.append(f"{url} opens a lesson that does not exist")
        elif github and github[1].lower().endswith("d2l-gpu") and github[1] != REPOSITORY:
            problems.append(f"{url} points at {github[1]}, not {REPOSITORY}")
    prose = re.sub(r"```.*?```|`[^`\n]*`", "", text, flags=re.S)  # a link in code is code
    for target in re.findall(r"\]\(([^)\s]+)\)", prose):
        relative = not re.match(r"[a-z+]+:|#", target)  # not an address, not an anchor
        if relative and not (path.parent / target.split("#")[0]).exists():
            problems.append(f"the link ({target}) leads nowhere")
    assert not problems, f"{_rel(path)}: " + "; ".join(problems)


def test_index_lists_every_lesson_in_its_group_with_colab_badges():
    index = _index()
    heading = f"## {GROUP['en']} / {GROUP['zh']}"
    chapter, _, beyond = index.partition(f"\n{heading}\n")
    assert beyond, f"notebooks/README.md has no {heading!r} section"
    problems = []
    for path in LESSON_SOURCES:
        lang, name = path.parent.name, path.stem
        row = f"]({lang}/{name}.ipynb) {_badge(lang, name)}"
        group, other = (beyond, chapter) if _beyond(path) else (chapter, beyond)
        if group.count(row) != 1 or row in other:
            problems.append(f"{lang}/{name} (linked once, with its Colab badge, in its group)")
    listed = re.findall(r"\]\((?:en|zh)/(\d\d)-", index)
    assert not problems, "notebooks/README.md does not list " + ", ".join(problems)
    assert listed == sorted(listed), "notebooks/README.md lists the lessons out of order"
    assert "](gpu/README.md)" in index, "notebooks/README.md does not link gpu/README.md"


def test_readme_lists_every_lesson_and_fits_8000_characters():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [_rel(p.with_suffix(".ipynb")) for p in LESSON_SOURCES
               if f"]({_rel(p.with_suffix('.ipynb'))})" not in readme]  # fmt: skip
    assert not missing, "README.md does not link " + ", ".join(missing)
    assert len(readme) <= 8000, f"README.md has {len(readme)} characters, at most 8,000"
    section = "\n\n".join(_chinese_prose("README.md"))
    shorts = [t.split(TITLE_SHORT["zh"])[0] for k, t in _index_titles().items() if k[:2] == "zh"]
    missing = [f"“{t}”" for t in shorts[CHAPTER_PATH:] if f"“{t}”" not in section]
    assert f"{GROUP['zh']}" in section and not missing, (
        f"README.md's 中文简介 does not name {GROUP['zh']} or the lessons {', '.join(missing)}"
    )


_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
# Han characters, CJK and full-width punctuation: what separates words in Chinese.
_CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")
# A comment starts a line or follows a space; a "#" inside a word ("Step#1") is no comment.
_COMMENT = re.compile(r"(?:^|\s)#\s?(.*)$", re.M)


def _comment_texts(source: str) -> list[str]:
    return [m[1] for m in _COMMENT.finditer(source)]


def _words(path: Path) -> float:
    """Markdown and code comments, as a reader reads both as prose; half a word per Han
    character, as two carry about one English word."""
    comments = [text for source in _code(path) for text in _comment_texts(source)]
    text = "\n".join(_markdown(path) + comments)
    text = re.sub(r"\]\([^)]*\)", "]", text)  # a link's text is prose, its target is not
    return len(_HAN.findall(text)) / 2 + len(_CJK.sub(" ", text).split())


@pytest.mark.parametrize("name", [*map(_rel, LESSON_SOURCES), *LANGUAGES])
def test_prose_fits_its_word_cap(name):
    """Each lesson, and each language's lessons 01-07 together (the chapter's path)."""
    if name in LANGUAGES:
        lessons = [p for p in LESSON_SOURCES if p.parent.name == name and not _beyond(p)]
        cap = 6500
    else:
        lessons = [ROOT / name]
        cap = 1600 if _beyond(lessons[0]) else 1100
    words = sum(_words(p) for p in lessons)
    assert words <= cap, (
        f"{name}: {words:.0f} words of prose (markdown and code comments; two Han "
        f"characters count as one word), at most {cap}"
    )


# The code: identical in both languages, a plain script, no retired names


def _without_comments(source: str) -> list[tuple[int, str]]:
    """The cell's tokens without comments and blank lines: what runs."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):  # the plain-script test names the cell
        return [(-1, source)]
    return [(t.type, t.string) for t in tokens if t.type not in (tokenize.COMMENT, tokenize.NL)]


@pytest.mark.parametrize("name", sorted({p.stem for p in LESSON_SOURCES}))
def test_both_languages_have_the_lesson_with_identical_code(name):
    paths = [NOTEBOOKS / lang / f"{name}.py" for lang in LANGUAGES]
    missing = [_rel(p) for p in paths if not p.is_file()]
    assert not missing, f"{name}: its twin {', '.join(missing)} is missing"
    en, zh = (_code(p) for p in paths)
    assert len(en) == len(zh), f"{name}: {len(en)} code cells in en, {len(zh)} in zh"
    for i, (a, b) in enumerate(zip(en, zh, strict=True)):
        assert _without_comments(a) == _without_comments(b), (
            f"{name}: code cell {i + 1} differs between en and zh beyond its comments"
        )


# Calls that create files. A lesson using one must work in a temporary folder.
_WRITES = re.compile(
    r"open\([^)]*['\"][wax]b?\+?['\"]|\.savefig\(|torch\.save\(|np\.save|\.write_(?:text|bytes)\("
    r"|\.to_csv\(|\.mkdir\(|os\.makedirs\("
)
_DOCUMENTED = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@pytest.mark.parametrize("path", LESSON_SOURCES, ids=_rel)
def test_lesson_code_is_a_plain_script(path):
    """It runs as `python NN-slug.py` too: only the setup cell's guarded install is IPython."""
    problems = []
    for i, source in enumerate(_code(path)):
        where = f"code cell {i + 1}"
        try:
            compile(source, f"{path.name}, {where}", "exec")
        except SyntaxError as error:
            problems.append(f"{where} does not compile: {error.msg}")
            continue
        if re.search(r"^\s*[%!]", source, re.M) or (i > 0 and "get_ipython" in source):
            problems.append(f"{where} uses IPython (a % or ! line, or get_ipython())")
        nodes = [n for n in ast.walk(ast.parse(source)) if isinstance(n, _DOCUMENTED)]
        if any(ast.get_docstring(n) is not None for n in nodes):
            problems.append(f"{where} has a docstring (write a comment: zh translates it)")
    code, text = "\n".join(_code(path)), path.read_text(encoding="utf-8")
    if _WRITES.search(code) and "tempfile" not in code:
        problems.append("it writes files, but not into a tempfile folder")
    if found := re.findall(r"D2L_DEVICE|\bENV_VAR\b", text):
        problems.append(f"{sorted(set(found))} are retired (CUDA_VISIBLE_DEVICES= hides GPUs)")
    if "raises-exception" in text:
        problems.append("a cell is tagged raises-exception: catch the error and print it")
    assert not problems, f"{_rel(path)}: " + "; ".join(problems)


# The stored outputs


def _output_text(output) -> str:
    texts = [output.get("text", ""), *output.get("traceback", [])]
    for kind, value in output.get("data", {}).items():
        if kind.startswith("text/") or kind.endswith("json"):
            texts.append(value if isinstance(value, str) else str(value))
    return "".join(t if isinstance(t, str) else "".join(t) for t in texts)


_MACHINE_FOLDER = re.compile(r"(?<![\w.])(?:/work/|/home/|/tmp/|/root/|/Users/|[A-Z]:\\Users\\)")
_REPR = re.compile(r"\b(?:Measurement|Comparison)\(|<[\w.]+ object at 0x")
_PROFILER_LOG = re.compile(r"^(?:USDT:|STAGE:|\[W\d*|\[I\d*|\[E\d*)", re.M)
_TIMES = re.compile(
    r"\b(?:benchmark|compare|host_and_device_seconds|perf_counter|elapsed_time)\(|\bTimer\("
)


@pytest.mark.parametrize("path", STORED, ids=_rel)
def test_stored_outputs_are_one_clean_run(path):
    notebook = _stored(path)
    counts = [c.execution_count for c in notebook.cells if c.cell_type == "code"]
    problems = [] if counts == list(range(1, len(counts) + 1)) else ["not one run, top to bottom"]
    if notebook.metadata.get("kernelspec", {}).get("name") != "python3":
        problems.append("its kernel is not python3")
    for i, cell in enumerate(notebook.cells):
        if extra := sorted(set(cell.metadata) - {"tags", "mystnb"}):
            # lines_to_next_cell: the .py has more or fewer blank lines than Jupytext writes
            problems.append(f"cell {i + 1} keeps metadata other than tags and alt text: {extra}")
        for output in cell.get("outputs", []):
            text = _output_text(output)
            where = f"cell {i + 1}"
            if output.get("output_type") == "error" or "Traceback (most recent call last)" in text:
                problems.append(f"{where}: a traceback (catch the error and print one line)")
            if (lines := len(text.splitlines())) > MAX_OUTPUT_LINES:
                problems.append(f"{where}: {lines} lines, at most {MAX_OUTPUT_LINES}")
            if found := _MACHINE_FOLDER.search(text):
                problems.append(f"{where}: names a folder {found[0]!r}")
            if found := _REPR.search(text) or _PROFILER_LOG.search(text):
                problems.append(f"{where}: prints {found[0]!r} (a repr or a log line)")
        timed = _TIMES.search(cell.source) and cell.get("outputs")
        if timed and "nbval-ignore-output" not in cell.metadata.get("tags", []):
            problems.append(f"cell {i + 1} prints a timing without the nbval-ignore-output tag")
    assert not problems, f"{_rel(path)}: " + "; ".join(problems)


# A figure is the result of the cell that draws it: labelled axes, closed (memory does
# not grow), stored as a PNG by tools/execute.py; nbval does not compare images.
_DRAWS = re.compile(r"\bplt\.(?:subplots|figure|plot|bar|scatter|imshow)\(")
FIGURE_LESSONS = (1, 4, 7, 9, 11)  # each draws its central idea


@pytest.mark.parametrize("path", STORED, ids=_rel)
def test_each_figure_is_labelled_closed_and_stored(path):
    cells = enumerate(_stored(path).cells, 1)
    drawing = [(i, c) for i, c in cells if c.cell_type == "code" and _DRAWS.search(c.source)]
    if _number(path) in FIGURE_LESSONS:
        assert drawing, f"{_rel(path)}: draws no figure"
    problems = []
    for i, cell in drawing:
        where = f"cell {i}, a figure,"
        for needed in ("set_xlabel(", "set_ylabel(", "plt.close("):
            if needed not in cell.source:
                problems.append(f"{where} never calls {needed}...)")
        if not any("image/png" in out.get("data", {}) for out in cell.get("outputs", [])):
            problems.append(f"{where} stores no PNG (make execute draws it)")
        if "nbval-ignore-output" not in cell.metadata.get("tags", []):
            problems.append(f"{where} lacks the nbval-ignore-output tag")
        if "dpi=200" not in cell.source:
            problems.append(f"{where} is not drawn at twice the pixels (dpi=200)")
        alt = cell.metadata.get("mystnb", {}).get("image", {}).get("alt", "")
        if len(_HAN.findall(alt) if path.parent.name == "zh" else alt.split()) < 5:
            problems.append(f"{where} has no alt text in its language (mystnb.image.alt)")
    assert not problems, f"{_rel(path)}: " + "; ".join(problems)


# The Chinese edition: the glossary (notebooks/zh/README.md), as far as a machine checks it.
# Words the glossary replaces: calques, and the second word of a pair where it keeps one.
_CALQUES = re.compile(
    r"普通行|Python 数(?![值组据字])|中位时间|翻上|调度器|分派器|普通笔记本|误差线|本章"
    r"|Frobenius\s*范数|锁页批量|热身|竞争|遥遥领先|交出|变成实物|这份 ?PyTorch|要的比"
    r"|(?:CPU|GPU|设备)\s*(?:上)?起步|(?:启动|亲手启动) ?CUDA|CUDA ?启动"
    r"|第[一二三四五六七八九十]课|两边|每一边|更贵"
    # A clock does not wait: the code waits, then reads it (读时钟之前先等设备 is fine).
    r"|时钟(?!之?前|以前)[^，。；：读]{0,4}等|等待?[^，。；：读]{0,6}的[^，。；：]{0,2}时钟"
    r"|它所服务的计算|损失掉的是队列|成大块地搬运|结果永远是假"
    # Start-up is 初始开销 (启动 is for kernels and processes); 相差 N 倍 and 多 N 倍 read two
    # ways; lessons 08 on are 拓展内容 everywhere.
    r"|(?:自己|自身|一次性|开头|最初)的?启动开销|库要?启动|书外延伸|原书以外的内容|工作内存|被结束"
    r"|相差(?:不到|约|近)?\s*[\d.,一二三四五六七八九十百千几]+\s*倍"
    r"|(?<![不至最])多\s*[\d一二三四五六七八九十几]+\s*倍"
)
_LONE_UNIT = re.compile(r"(?<!运算|计算)单元(?![格素]|测试)")
# A CPU core is 核心; 核 alone is kept for 核函数 and 内核 (and 核对, 核实, 核查, 核算).
_LONE_CORE = re.compile(r"(?<![内结])核(?![函心对实查算])")
_GPU_MEMORY = re.compile(r"(?:GPU|显卡)\s*(?:的|上的)?\s*内存")
# Half-width punctuation touching a Chinese character: Chinese prose takes ，；：！？（）.
_HALF_WIDTH = re.compile(r"[\u4e00-\u9fff][,;:!?()]|[,;:!?()][\u4e00-\u9fff]")
_TYPOGRAPHY = re.compile(r"\d %|\d ?[x*] ?\d")  # 25%, and 100 × 100 for sizes
_INLINE_CODE = re.compile(r"`[^`]*`|\]\([^)]*\)")
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def _paragraphs(text: str) -> list[str]:
    return re.split(r"\n\s*\n", text)


def _chinese_prose(name: str) -> list[str]:
    """A zh lesson's markdown paragraphs; a file's Chinese ones (README.md: its 中文简介)."""
    if name.endswith(".py"):
        return [p for text in _markdown(ROOT / name) for p in _paragraphs(text)]
    text = _FENCE.sub("", (ROOT / name).read_text(encoding="utf-8"))  # code is not prose
    if name == "README.md":
        text = text.partition("\n## 中文简介\n")[2].partition("\n## ")[0]
    return [p for p in _paragraphs(text) if _HAN.search(p)]


CHINESE = [*map(_rel, ZH_SOURCES), "README.md", "notebooks/README.md"]
_ENGLISH = re.compile(r"[A-Za-z]{3,}\s+[A-Za-z]{2,}")  # two English words in a row


@pytest.mark.parametrize("name", CHINESE)
def test_chinese_follows_the_glossary_and_comments_are_chinese(name):
    """A lesson's code comments too, but the setup cell's (the same in every lesson); they are
    held to the words, not to the punctuation (they quote code)."""
    paragraphs = _chinese_prose(name)
    assert paragraphs, f"{name}: no Chinese text found"
    comments = []
    if name.endswith(".py"):
        comments = [text for source in _code(ROOT / name)[1:] for text in _comment_texts(source)]
    problems = []
    for paragraph in [*paragraphs, *comments]:
        prose = _INLINE_CODE.sub("", paragraph)
        where = repr(prose.strip()[:30])
        problems += [f"calque {m!r}" for m in _CALQUES.findall(prose)]
        problems += [f"单元 without 格 in {where}" for _ in _LONE_UNIT.findall(prose)]
        problems += [f"核 for a core (write 核心) in {where}" for _ in _LONE_CORE.findall(prose)]
        problems += [f"{m!r} for GPU memory (write 显存)" for m in _GPU_MEMORY.findall(prose)]
        if paragraph in comments:
            continue
        problems += [f"half-width {m!r} in Chinese prose" for m in _HALF_WIDTH.findall(prose)]
        problems += [f"{m!r}: write 25% and 100 × 100" for m in _TYPOGRAPHY.findall(prose)]
        problems += [f"two parentheses back to back in {where}" for _ in prose.split("）（")[1:]]
        problems += [f"straight or corner quote in {where}" for q in '"「」' if q in prose]
        if "笔记本电脑" in prose and "笔记本" in prose.replace("笔记本电脑", ""):
            problems.append(f"笔记本 and 笔记本电脑 in one paragraph: {where}")
    if english := [t for t in comments if _ENGLISH.search(t) and not _HAN.search(t)]:
        problems.append(f"English comments: {english[:3]}")
    assert not problems, f"{name}: " + "; ".join(problems)


# A line break inside a Chinese paragraph renders as a space (Chromium, JupyterLab): after a
# Han character or Chinese punctuation, a Han character stays on the same line.
_BROKEN = re.compile(rf"(?:{_CJK.pattern}|[“”…])\n[ \t]*{_HAN.pattern}")


@pytest.mark.parametrize("name", [*CHINESE, "notebooks/zh/README.md"])
def test_no_line_break_inside_a_chinese_paragraph(name):
    text = _FENCE.sub("", "\n\n".join(_chinese_prose(name)))  # code keeps its lines
    broken = [re.sub(r"\n[ \t]*", "⏎", m) for m in _BROKEN.findall(text)]
    assert not broken, f"{name}: {len(broken)} line breaks a reader sees as spaces: {broken[:8]}"


def test_glossary_names_each_checked_term():
    glossary = (NOTEBOOKS / "zh" / "README.md").read_text(encoding="utf-8")
    checked = ("笔记本电脑", "单元格", "核函数", "分发器", "中位数", "锁页内存", "显存", "误差棒")
    checked += ("弗罗贝尼乌斯", "锁页内存中的批次", "预热", "竞态", "初始化", "遥遥领先", "起步")
    checked += ("初始开销", "相差", GROUP["zh"], "书外延伸", "工作空间")
    others = ("核心", "本节", "驱动", "编号", "会合", "集合通信", "流", "性能分析器", "meta 设备")
    missing = [term for term in (*checked, *others) if term not in glossary]
    assert not missing, f"notebooks/zh/README.md does not name {', '.join(missing)}"


def _limits(lesson: str) -> dict[str, dict]:
    """The LIMITS table that a lesson writes out in full, read as the literal it is."""
    tree = ast.parse((NOTEBOOKS / "en" / f"{lesson}.py").read_text(encoding="utf-8"))
    assignments = [node for node in ast.walk(tree) if isinstance(node, ast.Assign)]
    tables = [
        a.value for a in assignments if [getattr(t, "id", "") for t in a.targets] == ["LIMITS"]
    ]
    assert len(tables) == 1, f"{lesson}: {len(tables)} LIMITS tables, expected one"
    rows = zip(tables[0].keys, tables[0].values, strict=True)
    return {
        ast.literal_eval(name): {k.arg: ast.literal_eval(k.value) for k in row.keywords}
        for name, row in rows
    }


def test_the_remedies_copy_of_the_limits_table_matches_three_limits():
    """12 copies 11's datasheet figures so that a reader sees them; they must not drift."""
    eleven, twelve = _limits("11-three-limits"), _limits("12-remedies")
    assert set(twelve) <= set(eleven), f"12 names cards 11 lacks: {set(twelve) - set(eleven)}"
    for name, row in twelve.items():
        theirs = eleven[name]
        mine = (row["float32"], row["low"], row["memory"])
        assert mine == (theirs["float32"], theirs["float16"], theirs["memory"]), name
