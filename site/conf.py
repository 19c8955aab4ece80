"""Sphinx settings of the site in both languages: site/build.py builds each with -t en or -t zh."""

import logging

project = html_title = "d2l-gpu"
language = "zh_CN" if tags.has("zh") else "en"  # noqa: F821 (zh: search splits words with jieba)
logging.getLogger("jieba").disabled = True  # its chatter while it loads its dictionary
extensions = ["myst_nb"]
nb_execution_mode = "off"  # the stored outputs, which nbval checks
myst_enable_extensions = ["attrs_inline"]  # the Colab button's classes
myst_heading_anchors = 3  # the glossary's sections, which the zh lessons link to
html_theme = "sphinx_book_theme"
html_theme_options = {"navbar_end": ["language-link.html"],  # top right, on every page
                      "use_download_button": False}  # a lesson links its own .ipynb instead
templates_path = ["templates"]
html_context = {"other": "en" if language == "zh_CN" else "zh"}  # templates/language-link.html
