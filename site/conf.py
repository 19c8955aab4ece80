"""Sphinx settings of the site in both languages: site/build.py builds each with -t en or -t zh."""

import logging

project = html_title = "d2l-gpu"
author = "d2l-gpu contributors"  # the footer: "By d2l-gpu contributors"
language = "zh_CN" if tags.has("zh") else "en"  # noqa: F821 (zh: search splits words with jieba)
logging.getLogger("jieba").disabled = True  # its chatter while it loads its dictionary
extensions = ["myst_nb", "sphinx_copybutton"]
copybutton_selector = ".cell_input pre"  # a lesson's code, not what it printed
nb_execution_mode = "off"  # the stored outputs, which nbval checks
myst_enable_extensions = ["attrs_inline"]  # the Colab button's classes
myst_heading_anchors = 3  # the glossary's sections, which the zh lessons link to
html_theme = "sphinx_book_theme"
# No top navbar, so the language link sits beside the sidebar button: where the theme renders
# the navbar, its hidden sidebar buttons take the visible ones' handlers and no sidebar opens on
# a phone (pydata-sphinx-theme#2451, sphinx-book-theme#988; open in sphinx-book-theme 1.4.0).
html_theme_options = {
    "navbar_persistent": [],
    "article_header_start": ["toggle-primary-sidebar.html", "language-link.html"],
    "max_navbar_depth": 1,  # the GPU records: listed on the GPU page, not in the sidebar
    "use_download_button": False,  # a lesson links its own .ipynb instead
}
templates_path, html_static_path = ["templates"], ["static"]
html_css_files, html_js_files = ["site.css"], ["search.js"]
html_copy_source = False  # no _sources/: no page links to them
html_context = {"other": "en" if language == "zh_CN" else "zh"}  # templates/language-link.html
