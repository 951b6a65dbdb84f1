// MathJax settings for pymdownx.arithmatex (generic mode): $...$ and $$...$$ in pages and docstrings.
// Read by the bundled renderer (vendor/mathjax/tex-svg.js, docs/tools/vendor.py), loaded after
// this file: SVG output, so no web fonts are fetched.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: { ignoreHtmlClass: ".*|", processHtmlClass: "arithmatex" },
};
document$.subscribe(() => { MathJax.typesetPromise(); });
