"""make site: `python site/build.py [NOTEBOOKS]` stages each language in build/site-src/ from the
stored outputs (nothing runs) and builds it there with Sphinx, warnings as errors; only then do
the pages go, in a new folder, in place of build/site/, so a failed, interrupted or concurrent
build (a lock makes it wait) leaves the last good site whole. Staged files keep their time when
unchanged and Sphinx keeps its doctrees and pages, so a rebuild redoes only what changed."""

import fcntl
import re
import shutil
import signal
import sys
from os.path import relpath
from pathlib import Path

import nbformat
from nbformat import NotebookNode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from publish_gpu import as_run, machines, markdown_text, read, title  # noqa: E402 (GPU records)

HAN = "[\u4e00-\u9fff]"  # zh search finds the glossary's terms whole (锁页内存): jieba's words
BADGE = re.compile(r"\[!\[Open In Colab\]\([^)]*\)\]\((\S+?)\)")
RELATIVE = re.compile(r"(?<!!)\[([^\]]*)\]\((?!https?:|#)[^)]*\)")
OUTSIDE = re.compile(r"\[([^\]]*)\]\((\.\./[^)#]*)(#[^)]*)?\)")  # a link out of a lesson folder
LINKS = {"../README.md": ("index.md", "the index", "目录"),  # its page here; words for a path
         "../gpu/README.md": ("gpu/README.md", "what a GPU printed", "GPU 打印的结果"),
         "../../README.md": ("https://github.com/d2l-gpu/d2l-gpu#readme", "README", "README")}
GPU_LINE = re.compile(r"\n\n.*\]\(\.\./gpu/README\.md\).*")  # the generated line says it
FACTS = ["driver", "torch", "cuda", "date", "commit"]  # a GPU record's, untrusted: escaped
OUTPUTS = {"text/plain", "image/png"}  # what a page shows of an output: never HTML or a script
UNUSED = shutil.ignore_patterns(  # what no page loads, from myst-nb, Sphinx and the theme
    "jupyter_execute", "_sources", "*.map", ".*", "*macros.html", "locales")
IMAGE = re.compile(r'src="(?:\.\./)*_images/([^"]+)"')  # where a page shows a lesson's figure
BUTTON = "[{}]({}){{.btn .btn-outline-primary .btn-sm}}"
SAY = {
    "en": dict(colab="Open in Colab", get="Download the notebook",
        made="Outputs from a run on {device} with torch {torch}, {date}. ",
        same="{gpu} ran this lesson as it is on {date}: [what it printed]({page}).",
        older="An older version of this lesson ran on {gpu} on {date}: [what it printed]({page}).",
        none="No GPU has run this lesson yet; [what GPUs printed for the others](gpu/README.md).",
        book="The book's own section: [GPUs](https://d2l.ai/chapter_builders-guide/use-gpu.html).",
        record="{gpu}, driver {driver}, torch {torch} (CUDA {cuda}), {date}, commit {commit}:"
        " {same} of today's {total} code cells are the code it ran."),
    "zh": dict(colab="在 Colab 中打开", get="下载笔记本",
        made="本页输出来自 {date} 在 {device} 上用 torch {torch} 的一次运行。",
        same="{gpu} 于 {date} 原样运行过本课：[它打印的结果]({page})。",
        older="{gpu} 于 {date} 运行过本课的一个旧版本：[它打印的结果]({page})。",
        none="还没有 GPU 运行过这一课；[其他各课在 GPU 上打印的结果](gpu/README.md)。",
        book="原书的这一节：[GPU](https://zh.d2l.ai/chapter_deep-learning-computation/use-gpu.html)。",
        record="{gpu}，驱动 {driver}，torch {torch}（CUDA {cuda}），{date}，提交 {commit}："
        "今天这一课的 {total} 个代码单元格中，有 {same} 个与它运行的代码相同。"),
}


def text(path: Path) -> str:
    if not path.is_file():
        raise SystemExit(f"{path}: missing; the site is built from it")
    return path.read_text(encoding="utf-8")


def relink(source: str, lang: str, where: Path) -> str:
    """Links out of a lesson folder go to the site's page; words that were a path, its name."""
    def site(link: re.Match) -> str:
        if link[2] not in LINKS:
            raise SystemExit(f"{where}: {link[0]} leads nowhere on the site; a link out of a"
                             f" lesson folder may go to {', '.join(LINKS)}")
        page, *names = LINKS[link[2]]
        words = names[lang == "zh"] if re.fullmatch(r"`?[\w./-]+`?", link[1]) else link[1]
        return f"[{words}]({page}{link[3] or ''})"
    return OUTSIDE.sub(site, source)


def stage_notebook(
    notebook: NotebookNode, source: Path, lang: str, line: str, record: str = ""
) -> str:
    """`notebook` (read from `source`) with `line` where its Colab badge was ({url}: the badge's
    address), its outputs only text and PNG, its setup cell folded. A GPU record is titled
    `record` (its own title is untrusted) over `line`; its links are plain text and search
    leaves it out (lessons first)."""
    if not notebook.cells:
        raise SystemExit(f"{source}: no cells; a lesson starts with its title and Colab badge")
    for cell in notebook.cells:
        if cell.cell_type == "code":
            for output in (o for o in cell.outputs if "data" in o):
                output.data = {k: v for k, v in output.data.items() if k in OUTPUTS}
            cell.outputs = [o for o in cell.outputs if o.get("data", True)]
        elif record:
            cell.source = RELATIVE.sub(r"\1", GPU_LINE.sub("", cell.source, 1))
        else:
            cell.source = relink(GPU_LINE.sub("", cell.source, 1), lang, source)
    first, setup = notebook.cells[0], notebook.cells[1:2]
    head, _, rest = first.source.partition("\n")  # a record's badge, if it kept one, goes
    rest, found = BADGE.subn(lambda badge: "" if record else line.replace("{url}", badge[1]), rest)
    if found != 1 and not record:
        raise SystemExit(f"{source}: its first cell has {found} Colab badges, not one")
    first.source = f"# {record}\n\n{line}\n{rest}" if record else f"{head}\n{rest}"
    if setup and "google.colab" in setup[0].source:  # Colab's setup, not the lesson: folded
        setup[0].metadata.setdefault("tags", []).append("hide-input")
    if record:  # Sphinx leaves out of search a page that has this key, whatever its value
        notebook.metadata["nosearch"] = True
    return nbformat.writes(notebook)


def toctree(entries: list[str], *options: str) -> str:
    return "\n".join(["```{toctree}", ":maxdepth: 1", *options, "", *entries, "```"])


def index(readme: Path, lang: str) -> str:
    """notebooks/README.md in one language, each table a toctree; then gpu/, zh: the glossary."""
    blocks = []
    for block in text(readme).split("\n\n"):
        if heading := re.fullmatch(r"(#+ )(.*)", block, re.S):  # "## Path / 主线", or one half
            blocks.append(heading[1] + heading[2].split(" / ")[-(lang == "zh")])
        elif block.startswith("|"):
            rows = re.findall(rf"^\| (\d+) .*?\[([^\]]+)\]\({lang}/([\w-]+)\.ipynb", block, re.M)
            blocks.append(toctree([f"{n} · {t.replace('`', '')} <{s}>" for n, t, s in rows]))
        elif bool(re.search(HAN, block)) == (lang == "zh") and "](" not in block:
            blocks.append(block)
    blocks.insert(2, SAY[lang]["book"])  # after the title and the first paragraph
    return "\n\n".join([*blocks, toctree(["gpu/README"] + ["README"] * (lang == "zh"))]) + "\n"


def stage(notebooks: Path, lang: str, manifests: list, out: Path) -> dict[str, str]:
    """The files of `out` (build/site-src/<lang>/): notebooks/gpu/ with each record's facts; each
    lesson with a line on what made its outputs and what a GPU printed for it; zh: the glossary
    and its terms for jieba (../zh-words.txt); the index."""
    say, files, runs = SAY[lang], {}, {}
    for folder, m in manifests:  # both languages' records, as gpu/README.md links both
        for name, file in m["lessons"].items():
            today = notebooks / f"{name}.ipynb"
            printed = read(folder / file)  # a notebook, or one line naming the file
            same, total = as_run(printed, today)
            facts = {k: markdown_text(m[k] or "?") for k in FACTS}
            facts.update(gpu=markdown_text(m["gpus"][0]), page=f"gpu/{folder.name}/{file}")
            ran = say["same" if same == total else "older"].format(**facts)
            runs.setdefault(name, []).append(ran)
            gpu = markdown_text(re.sub(r"[^\w .()-]", "", m["gpus"][0]))  # the theme prints a
            heading = f"{title(today) if today.is_file() else name} ({gpu})"  # title unescaped
            said = say["record"].format(**facts, same=same, total=total)
            files[facts["page"]] = stage_notebook(printed, folder / file, lang, said, heading)
    records = toctree(["*/*/*"], ":glob:", ":hidden:") if manifests else ""
    files["gpu/README.md"] = f"{text(notebooks / 'gpu' / 'README.md')}\n{records}\n"
    for lesson in sorted((notebooks / lang).glob("[0-9]*.ipynb")):
        notebook = read(lesson)
        made = notebook.metadata.get("executed", {})
        if missing := {"device", "torch", "date"} - set(made):
            raise SystemExit(f"{lesson}: metadata.executed lacks {', '.join(sorted(missing))};"
                             " tools/execute.py records what made a lesson's outputs")
        made = say["made"].format(**{k: markdown_text(made[k]) for k in made})
        download = "path:" + relpath(lesson, out)  # Sphinx copies it into _downloads/
        buttons = f"{BUTTON.format(say['colab'], '{url}')} {BUTTON.format(say['get'], download)}"
        gpus = " ".join(runs.get(f"{lang}/{lesson.stem}", [])) or say["none"]
        files[lesson.name] = stage_notebook(notebook, lesson, lang, f"{buttons}\n\n{made}{gpus}")
    if lang == "zh":  # the glossary, README.md as the zh lessons link to it
        files["README.md"] = relink(text(notebooks / "zh" / "README.md"), lang, notebooks / "zh")
        terms = " ".join(re.findall(r"^\| [ -{]+ \| ([^|]+) \|[^|]*\|$", files["README.md"], re.M))
        files["../zh-words.txt"] = "\n".join(re.findall(HAN + "{2,}", terms))
    files["index.md"] = index(notebooks / "README.md", lang)
    return files


def sync(folder: Path, files: dict[str, str]) -> bool:
    """Write each file whose text changed (one unchanged keeps its time: Sphinx does not read it
    again) and remove those no longer staged; whether any was removed (its page would stay)."""
    for path, content in ((folder / name, content) for name, content in files.items()):
        if not path.is_file() or path.read_text("utf-8") != content:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, "utf-8")
    staged = {(folder / name).resolve() for name in files}
    gone = [p for p in folder.rglob("*") if p.is_file() and p.resolve() not in staged]
    for path in gone:
        path.unlink()
    return bool(gone)


def swap_in(pages: Path, site: Path) -> None:
    """Copy what pages use into a new folder beside `site`, then rename it over `site`; Ctrl-C
    and SIGTERM wait until both renames are done, so there is always one whole site."""
    shown = {name for page in pages.rglob("*.html") for name in IMAGE.findall(page.read_text())}

    def unused(folder: str, names: list[str]) -> set[str]:  # Sphinx leaves a replaced figure
        stale = set(names) - shown if Path(folder).name == "_images" else set()
        return UNUSED(folder, names) | stale

    new, old = site.with_name(".site-new"), site.with_name(".site-old")
    shutil.copytree(pages, new, ignore=unused)
    shutil.copy(ROOT / "site" / "index.html", new / "index.html")
    stops = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    if site.exists():
        site.rename(old)
    new.rename(site)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
    shutil.rmtree(old, ignore_errors=True)


def build(notebooks: Path, into: Path) -> int:
    """Stage, build each language in `into`/site-src/pages/, then swap it in as `into`/site."""
    work, manifests = into / "site-src", machines(notebooks)
    staged = {lang: stage(notebooks, lang, manifests, work / lang) for lang in SAY}
    unfinished = work / "unfinished"
    if unfinished.exists():  # Sphinx would not warn again of what failed there: start afresh
        shutil.rmtree(work)
    for stale in into.glob(".site-*"):  # what a killed build left beside the site
        shutil.rmtree(stale)
    for lang, files in staged.items():
        if sync(work / lang, files):
            shutil.rmtree(work / "pages" / lang, ignore_errors=True)
    unfinished.touch()
    from sphinx import locale  # here: staging and its checks need only nbformat
    from sphinx.cmd.build import build_main

    for lang in SAY:
        locale.translators.clear()  # Sphinx keeps the last language's words for the next build
        options = ["-W", "-q", "-t", lang, "-c", str(ROOT / "site"), "-d", str(work / f".{lang}"),
                   "-D", f"html_search_options.dict={work / 'zh-words.txt'}"]  # zh only
        if build_main([*options, str(work / lang), str(work / "pages" / lang)]):  # or stopped
            print(f"site: the {lang} pages did not build; {into / 'site'} is as it was")
            return 1
    unfinished.unlink()
    swap_in(work / "pages", into / "site")
    return 0


def main(argv: list[str], into: Path = ROOT / "build") -> int:
    """Build the site from `argv`'s one folder of notebooks; a second build at once waits."""
    notebooks = Path(argv[0] if argv else ROOT / "notebooks").resolve()
    if len(argv) > 1:
        raise SystemExit(f"site/build.py: one folder of notebooks expected, got {len(argv)}"
                         f" arguments {argv} (quote a path with a space)")
    if not notebooks.is_dir():
        raise SystemExit(f"{notebooks}: no such folder; SITE_NOTEBOOKS names a copy of notebooks/")
    into.mkdir(parents=True, exist_ok=True)
    with open(into / "site.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print("site: another build of the site is running; this one waits for it", flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return build(notebooks, into)
        except KeyboardInterrupt:
            print(f"site: interrupted; {into / 'site'} is as it was")
            return 130


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM stops as Ctrl-C does
    sys.exit(main(sys.argv[1:]))
