"""make site: `python site/build.py [NOTEBOOKS]` stages each language in build/site-src/ from the
stored outputs (nothing runs); Sphinx builds it in build/site/, warnings as errors."""

import re
import shutil
import sys
from os.path import relpath
from pathlib import Path

import nbformat
from sphinx.cmd.build import build_main

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from publish_gpu import as_run, machines  # noqa: E402 (the GPU records, as its page reads them)

STAGE, SITE = ROOT / "build" / "site-src", ROOT / "build" / "site"
HAN = "[\u4e00-\u9fff]"  # zh search finds the glossary's terms whole (锁页内存): jieba's words
BADGE = re.compile(r"\[!\[Open In Colab\]\([^)]*\)\]\((\S+?)\)")
RELATIVE = re.compile(r"(?<!!)\[([^\]]*)\]\((?!https?:|#)[^)]*\)")
OUTSIDE = re.compile(r"\]\((\.\./(?:\.\./)?(?:README\.md|gpu/))")  # links out of a lesson folder
LINKS = {"../README.md": "index.md", "../gpu/": "gpu/",
         "../../README.md": "https://github.com/d2l-gpu/d2l-gpu/blob/main/README.md"}
BUTTONS = "[{colab}]({url}){{.btn .btn-outline-primary .btn-sm}} {{download}}`{get} <{ipynb}>`"
RECORD = ("{gpu}, driver {driver}, torch {torch} (CUDA {cuda}), {date}, commit {commit}:"
          " {same} of {total} code cells as run.")  # as notebooks/gpu/README.md says it
SAY = {
    "en": dict(colab="Open in Colab", get="Download the notebook",
        made="Outputs from a run on {device} with torch {torch}, {date}. ",
        gpu="[What {gpu} printed]({page}) on {date}: it ran {same} of these {total} cells as is.",
        none="No GPU has run this lesson yet."),
    "zh": dict(colab="在 Colab 中打开", get="下载笔记本", none="还没有 GPU 运行过这一课。",
        made="本页输出来自 {date} 在 {device} 上用 torch {torch} 的一次运行。",
        gpu="本课 {total} 个代码单元格中，{gpu} 原样运行过 {same} 个："
        "[它打印的结果]({page})（{date}）。"),
}


def relink(text: str) -> str:
    return OUTSIDE.sub(lambda link: f"]({LINKS[link[1]]}", text)


def stage_notebook(source: Path, target: Path, line: str, record: str = "") -> None:
    """A copy with `line` where its Colab badge was ({url}: the badge's address), its links
    relinked; a GPU record's title names the `record` and its links are plain text (stale)."""
    notebook = nbformat.read(source, as_version=4)
    for cell in (c for c in notebook.cells if c.cell_type == "markdown"):
        cell.source = RELATIVE.sub(r"\1", cell.source) if record else relink(cell.source)
    title = notebook.cells[0]
    title.source = title.source.replace("\n", f" ({record})\n" if record else "\n", 1)
    title.source, found = BADGE.subn(lambda badge: line.replace("{url}", badge[1]), title.source)
    if found != 1:
        raise SystemExit(f"{source}: its first cell has {found} Colab badges, not one")
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)


def toctree(entries: list[str], *options: str) -> str:
    return "\n".join(["```{toctree}", ":maxdepth: 1", *options, "", *entries, "```"])


def index(readme: Path, lang: str) -> str:
    """notebooks/README.md in one language, each table a toctree; then gpu/, zh: the glossary."""
    blocks = []
    for block in readme.read_text(encoding="utf-8").split("\n\n"):
        if block.startswith("#"):
            marks, heading = block.split(" ", 1)
            blocks.append(f"{marks} {heading.split(' / ')[lang == 'zh']}")
        elif block.startswith("|"):
            rows = re.findall(rf"^\| (\d+) .*?\[([^\]]+)\]\({lang}/([\w-]+)\.ipynb", block, re.M)
            blocks.append(toctree([f"{n} · {t.replace('`', '')} <{s}>" for n, t, s in rows]))
        elif bool(re.search(HAN, block)) == (lang == "zh") and "](" not in block:
            blocks.append(block)
    return "\n\n".join([*blocks, toctree(["gpu/README"] + ["README"] * (lang == "zh"))]) + "\n"


def stage(notebooks: Path, lang: str, manifests: list) -> None:
    """build/site-src/<lang>/: notebooks/gpu/ with each record's facts; each lesson with a line
    on what made its outputs and what a GPU printed for it; zh: the glossary; the index."""
    say, out, runs = SAY[lang], STAGE / lang, {}
    for folder, m in manifests:  # both languages' records, as gpu/README.md links both
        for name, file in m["lessons"].items():
            ran = nbformat.read(folder / file, as_version=4)
            same, total = as_run(ran, notebooks / f"{name}.ipynb")
            facts = {**m, "gpu": m["gpus"][0], "commit": m["commit"] or "?", "same": same,
                     "total": total, "page": f"gpu/{folder.name}/{file}"}
            runs.setdefault(name, []).append(facts)
            stage_notebook(folder / file, out / facts["page"], RECORD.format(**facts), facts["gpu"])
    readme = (notebooks / "gpu" / "README.md").read_text(encoding="utf-8")
    (out / "gpu").mkdir(parents=True, exist_ok=True)
    records = toctree(["*/*/*"], ":glob:", ":hidden:")
    (out / "gpu" / "README.md").write_text(f"{readme}\n{records}\n", encoding="utf-8")
    for lesson in sorted((notebooks / lang).glob("[0-9]*.ipynb")):
        made = nbformat.read(lesson, as_version=4).metadata.get("executed")
        if not made:
            raise SystemExit(f"{lesson}: no record of what made its outputs (tools/execute.py)")
        gpus = [say["gpu"].format(**run) for run in runs.get(f"{lang}/{lesson.stem}", [])]
        said = say["made"].format(**made) + (" ".join(gpus) or say["none"])
        buttons = BUTTONS.format(**say, ipynb=relpath(lesson, out), url="{url}")
        stage_notebook(lesson, out / lesson.name, f"{buttons}\n\n{said}")
    if lang == "zh":  # the glossary, README.md as the zh lessons link to it; its terms for jieba
        glossary = relink((notebooks / "zh" / "README.md").read_text(encoding="utf-8"))
        (out / "README.md").write_text(glossary, encoding="utf-8")
        terms = " ".join(re.findall(r"^\| [ -{]+ \| ([^|]+) \|[^|]*\|$", glossary, re.M))
        (STAGE / "zh-words.txt").write_text("\n".join(re.findall(HAN + "{2,}", terms)), "utf-8")
    (out / "index.md").write_text(index(notebooks / "README.md", lang), encoding="utf-8")


def main(argv: list[str]) -> int:
    notebooks = Path(argv[0] if argv else ROOT / "notebooks").resolve()
    manifests = machines(notebooks)
    for folder in (STAGE, SITE):
        shutil.rmtree(folder, ignore_errors=True)
    for lang in SAY:
        stage(notebooks, lang, manifests)
        options = ["-W", "-q", "-t", lang, "-c", str(ROOT / "site"), "-d", str(STAGE / f".{lang}"),
                   "-D", f"html_search_options.dict={STAGE / 'zh-words.txt'}"]  # zh only
        if build_main([*options, str(STAGE / lang), str(SITE / lang)]):
            return 1
    shutil.copy(ROOT / "site" / "index.html", SITE / "index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
