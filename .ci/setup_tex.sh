#!/usr/bin/env bash
# A minimal TeX Live for the paper report (reports/paper/paper.tex): pdfLaTeX, latexmk,
# and the recommended LaTeX packages the paper uses (booktabs, graphicx). Debian's own
# packages, no recommends (no docs, no fonts beyond Latin Modern). Idempotent; as root.
# Measured: about 80 MB, 121 s in a fresh Debian bookworm container (README, "The paper report").
set -euo pipefail
if ! command -v latexmk >/dev/null 2>&1 || ! kpsewhich booktabs.sty >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends latexmk texlive-latex-base texlive-latex-recommended >/dev/null
fi
latexmk -v | head -2 | tail -1
pdflatex --version | head -1
