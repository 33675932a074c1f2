"""MkDocs hooks of the site (mkdocs.yml): Mermaid from the npm package, the README as the home page with its links
made relative (so the strict build checks them), and every generated table held to its declaration."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools import reference_docs  # noqa: E402  (the hook is loaded by path, not as a package)

# Material loads Mermaid from a CDN unless the page has it: the site ships the npm package's build instead.
MERMAID = ROOT / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
MERMAID_URI = "assets/javascripts/mermaid.min.js"
RAW_DOCS = "https://raw.githubusercontent.com/sendonce/sendonce/main/docs/"


def on_files(files: Files, config: MkDocsConfig, **_: Any) -> Files:
    if not MERMAID.is_file():
        raise PluginError(f"{MERMAID.relative_to(ROOT)} is missing: run `npm ci` (make setup does)")
    files.append(File.generated(config, MERMAID_URI, abs_src_path=str(MERMAID)))
    return files


def on_page_read_source(page: Page, config: MkDocsConfig, **_: Any) -> str | None:
    # The home page is the README itself, so the two cannot say different things.
    return (ROOT / "README.md").read_text(encoding="utf-8") if page.file.src_uri == "index.md" else None


def relative_site_links(markdown: str, site_url: str, page_uri: str) -> str:
    """Links to this site's own pages (``{site_url}guarantees/#the-crash-window``), as the page's relative links
    to the Markdown files (``guarantees.md#the-crash-window``)."""
    depth = page_uri.count("/")
    up = "../" * depth

    def relative(match: re.Match[str]) -> str:
        path, anchor = match["path"].rstrip("/"), match["anchor"] or ""
        return f"]({up}{path or 'index'}.md{anchor})"

    markdown = re.sub(rf"\]\({re.escape(site_url)}(?P<path>[a-z0-9/-]*)(?P<anchor>#[a-z0-9-]+)?\)", relative, markdown)
    # The README's pictures, which a package index page takes from the repository, are the site's own files.
    return re.sub(rf"\]\({re.escape(RAW_DOCS)}(?P<path>[a-z0-9/.-]+)\)", lambda m: f"]({up}{m['path']})", markdown)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, **_: Any) -> str:
    stale = reference_docs.stale_blocks(markdown)
    if stale:
        raise PluginError(f"{page.file.src_uri}: generated tables differ from their declarations: {stale}; "
                          "run `make props-docs` and commit")
    return relative_site_links(markdown, str(config.site_url), page.file.src_uri)
