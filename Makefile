# The two commands of README.md:  make book  |  make test
# (plus make serve, make setup, make clean).  The work is done by the scripts in scripts/.
.PHONY: help setup book serve test check clean assignments

PORT ?= 8000

help:
	@echo "make book   set up .venv, packages and offline MathJax, then build the book into _build/html"
	@echo "make serve  serve _build/html on http://127.0.0.1:$(PORT) (builds it first if needed)"
	@echo "make test   set up, then unit tests, nbval on every notebook, a strict build, the browser test"
	@echo "make check  the fast loop: lint, unit tests, nbval on the notebooks a change touches"
	@echo "make setup  only the set-up (idempotent; about a second when nothing changed)"
	@echo "make clean  remove _build/ (build, execution caches, screenshots)"
	@echo "make assignments  student + instructor edition and a zip per chapter into assignments/"

setup:
	@scripts/setup.sh

book: setup
	@scripts/build.sh

serve:
	@[ -f _build/html/index.html ] || $(MAKE) book
	@echo "Serving the book on http://127.0.0.1:$(PORT)/ (Ctrl-C stops)"
	@.venv/bin/python -m http.server $(PORT) --bind 127.0.0.1 --directory _build/html

test: setup
	@scripts/test.sh

check: setup
	@scripts/check.sh

clean:
	rm -rf _build

# Course kit: student and instructor editions of every chapter, zipped (see the instructor guide);
# it needs only the Python set-up (no npm).
assignments:
	@scripts/setup.sh --python-only
	@.venv/bin/python scripts/assignments.py
