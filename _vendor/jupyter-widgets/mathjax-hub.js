// Part of the book, not of the vendored package (scripts/vendor_widgets.py keeps this file).
// The widget manager typesets widget labels with MathJax 2's call, MathJax.Hub.Queue(["Typeset",
// MathJax.Hub, element]); the book loads MathJax 3, which has no Hub, so every label would throw.
// This gives MathJax 3 that one call, on its typesetPromise. Loaded before embed.js, so that its
// handler runs before the manager draws the widgets on the window's load event.
window.addEventListener("load", function () {
  var mathjax = window.MathJax;
  if (!mathjax || mathjax.Hub) {
    return;
  }
  mathjax.Hub = {
    Queue: function (job) {
      var element = Array.isArray(job) ? job[2] : undefined;
      if (!element || typeof mathjax.typesetPromise !== "function") {
        return;
      }
      var ready = (mathjax.startup && mathjax.startup.promise) || Promise.resolve();
      ready
        .then(function () {
          return mathjax.typesetPromise([element]);
        })
        .catch(function (error) {
          console.warn("MathJax could not typeset a widget label", error);
        });
    },
  };
});
