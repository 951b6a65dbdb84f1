// Typeset formulas with MathJax's TeX input and SVG output, the components of the bundled
// tex-svg.js, in Node: `node typeset.cjs <mathjax es5 folder>`, formulas as JSON on stdin
// ([[tex, display], ...]); prints the JSON list of [index, error] for those that fail.
// Run by check_math.py: a formula MathJax cannot typeset shows as an error on the site.
const es5 = process.argv[2];
const formulas = JSON.parse(require("fs").readFileSync(0, "utf8"));
require(`${es5}/node-main.js`)
  .init({ loader: { load: ["input/tex", "output/svg"] } })
  .then((MathJax) => {
    const adaptor = MathJax.startup.adaptor;
    const errors = [];
    formulas.forEach(([tex, display], index) => {
      let svg;
      try {
        svg = adaptor.outerHTML(MathJax.tex2svg(tex, { display }));
      } catch (error) {
        // A TeX package outside tex-svg.js is autoloaded by a retry: not bundled.
        const why = error.retry ? "needs a TeX extension that tex-svg.js does not bundle" : String(error);
        errors.push([index, why]);
        return;
      }
      const message = svg.match(/data-mjx-error="([^"]*)"/);
      if (message) errors.push([index, message[1]]);
      else if (svg.includes('fill="red"')) errors.push([index, "undefined control sequence"]);
    });
    process.stdout.write(JSON.stringify(errors));
  })
  .catch((error) => {
    console.error(error);
    process.exit(2);
  });
