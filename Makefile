# Two commands do all the set-up on a fresh machine:
#   make demo   create .venv, install, run the pipeline on the embedded default (dvc repro), print the summary
#   make test   create .venv, install, run the tests
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch and torchvision must be a matching pair (timm needs torchvision; a mismatched one breaks transformers)
TORCH := torch==2.14.1 torchvision==0.29.1
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: demo test install clean

$(BIN)/drift: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet -e '.[test]' $(TORCH)
	touch $(BIN)/drift

install: $(BIN)/drift

demo: install
	. $(BIN)/activate && dvc repro
	. $(BIN)/activate && drift summary

test: install
	. $(BIN)/activate && python -m pytest -q

clean:
	rm -rf $(VENV) data dvc_plots
