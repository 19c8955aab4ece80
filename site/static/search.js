// Sphinx's search takes a result's preview from the page's [role=main], which in this theme
// also holds its buttons ("System Settings Light Dark") and contents: give it the lesson only.
// zh: Sphinx 8.2 says "found N pages" in words its Chinese catalogue does not translate yet.
document.addEventListener("DOMContentLoaded", () => {
  if (typeof Search === "undefined") return;
  const toText = Search.htmlToText;
  Search.htmlToText = (html, anchor) => {
    const page = new DOMParser().parseFromString(html, "text/html");
    page.querySelector("[role=main]")?.removeAttribute("role");
    page.querySelector("article")?.setAttribute("role", "main");
    return toText(page.documentElement.outerHTML, anchor);
  };
  if (document.documentElement.lang === "zh-CN")
    Documentation.TRANSLATIONS["Search finished, found one page matching the search query."] =
      ["搜索完成，找到 ${resultCount} 个页面。"];
});
