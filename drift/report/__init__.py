"""What a person reads: the report stage's tables and plots, the HTML page, saliency, readers of results."""
