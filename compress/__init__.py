"""compress: build, train and compare compressed students of BERT-family teachers."""

__version__ = "0.1.0"
