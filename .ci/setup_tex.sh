#!/usr/bin/env bash
# A minimal TeX Live for the paper report (reports/paper/paper.tex): pdfLaTeX, latexmk,
# the LaTeX packages the paper uses (booktabs, graphicx, array, float), Latin Modern (the T1
# fonts: lmodern), and poppler-utils (pdftoppm, pdftotext: tests/test_paper.py renders the
# pages). Debian's own packages, no recommends (no docs). Idempotent; as root.
# Measured: about 80 MB, 121 s in a fresh Debian bookworm container (README, "The paper report"),
# before lmodern and poppler-utils were added (not measured since).
set -euo pipefail
if ! command -v latexmk >/dev/null 2>&1 || ! kpsewhich booktabs.sty lmodern.sty >/dev/null 2>&1 \
   || ! command -v pdftoppm >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends latexmk texlive-latex-base texlive-latex-recommended \
    lmodern poppler-utils >/dev/null
fi
latexmk -v | head -2 | tail -1
pdflatex --version | head -1
