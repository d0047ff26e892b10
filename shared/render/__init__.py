"""Renderers: a Result's blocks as Markdown, HTML, plain text, table files and RAG chunks.

Pure Python (no PyMuPDF): the producer renders a stored Result on request. Import the
module you need; ``chunks`` needs tiktoken, which only the producer install brings.
"""
