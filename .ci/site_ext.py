"""Sphinx extension of the documentation site (.ci/make_site.py loads it from `conf.py`).

- Names in the prose link to the API: an inline code span (a backticked name in a notebook's
  markdown or a page) whose text is an object the API pages document (`read_configuration`,
  `suvi_fill.evaluate.bench.run_bench`, `szrank.search.obj.PUBLIC_RECORD()`) becomes a link to its entry.  A short
  name links only when exactly one object has it (`main`, which both packages have, stays text).
- Docstrings are prose, not reST: a `|x|` in one is an absolute value, not a substitution.
- intersphinx offline: the inventories of numpy, torch, astropy and sunpy cannot be fetched
  without a network; that is said in one line and the build goes on (links to them are then
  plain text) instead of the warning that `-W` would make an error.
"""
from __future__ import annotations

import logging
import re
import sys

from docutils import nodes
from sphinx import addnodes
from sphinx.transforms.post_transforms import SphinxPostTransform

NAME = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(?:\(\))?$")
#: Object kinds a prose name may link to (module names link too, by their full name only).
LINKED_KINDS = {"function", "class", "exception", "data", "attribute", "method", "property"}
OFFLINE = "failed to reach any of the inventories"


def api_targets(env) -> dict[str, str]:
    "Prose text -> full name of the documented object it names: full names, and short names held by one object."
    objects = env.get_domain("py").objects
    modules = {full for full, entry in objects.items() if entry.objtype == "module"}
    targets, short = {}, {}
    for full, entry in objects.items():
        if getattr(entry, "aliased", False):
            continue
        targets[full] = full
        if entry.objtype in LINKED_KINDS:
            parts = full.split(".")
            top_level = full.rpartition(".")[0] in modules       # a module's name, not a class member
            for k in range(1, len(parts)):                      # `bench.run_bench`, `run_bench`, `BenchSet.samples`
                if k == len(parts) - 1 and not top_level:
                    continue                                    # a bare member name (`path`) is too common to link
                short.setdefault(".".join(parts[k:]), set()).add(full)
    for text, fulls in short.items():
        if len(fulls) == 1 and text not in targets:
            targets[text] = next(iter(fulls))
    return targets


class ProseApiLinks(SphinxPostTransform):
    "Inline code naming an API object becomes a cross-reference (resolved by Sphinx's own resolver after this)."
    default_priority = 5

    def run(self, **kwargs) -> None:
        targets = getattr(self.env, "_site_api_targets", None)
        if targets is None or targets[0] != len(self.env.get_domain("py").objects):
            targets = (len(self.env.get_domain("py").objects), api_targets(self.env))
            self.env._site_api_targets = targets
        for node in list(self.document.findall(nodes.literal)):
            if isinstance(node.parent, (nodes.reference, addnodes.pending_xref, addnodes.desc_signature)) \
                    or "xref" in node["classes"]:
                continue
            match = NAME.match(node.astext())
            full = match and targets[1].get(match.group(1))
            if not full:
                continue
            reference = addnodes.pending_xref("", refdomain="py", reftype="obj", reftarget=full, refexplicit=True,
                                              refwarn=False, refdoc=self.env.docname)
            reference += nodes.literal(node.rawsource, node.astext(), classes=["xref", "py", "py-obj"])
            node.replace_self(reference)


def commented(name: str) -> bool:
    "Whether the module-level name `module.NAME` has a `#:` comment (or a docstring after it) in its source."
    from sphinx.pycode import ModuleAnalyzer
    module, _, attribute = name.rpartition(".")
    try:
        return ("", attribute) in ModuleAnalyzer.for_module(module).find_attr_docs()
    except Exception:                                   # no source to read: nothing is commented
        return False


def escape_bars(app, what, name, obj, options, lines) -> None:
    """`|x|` in a docstring is an absolute value: escape the bars so reST reads no substitution.  A constant
    without a comment of its own gets no docstring (autodoc would show its type's: `dict`'s, numpy `dtype`'s)."""
    if what == "data" and not commented(name):
        lines[:] = []                                   # the value's own docstring is its type's
        return
    for i, line in enumerate(lines):
        lines[i] = line.replace("|", r"\|")


class OfflineInventories(logging.Filter):
    "Turn intersphinx's 'failed to reach any of the inventories' warnings into one plain line on stderr."
    said = False

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING and OFFLINE in str(record.msg):
            if not self.said:                             # the inventories are fetched in threads: one line for all
                self.said = True
                print("site: intersphinx inventories not reachable (offline?); links into numpy, torch, astropy "
                      "and sunpy are left as text", file=sys.stderr, flush=True)
            return False
        return True


def setup(app):
    app.add_post_transform(ProseApiLinks)
    app.connect("autodoc-process-docstring", escape_bars)
    logging.getLogger("sphinx.sphinx.ext.intersphinx").addFilter(OfflineInventories())
    return {"parallel_read_safe": True, "parallel_write_safe": True}
