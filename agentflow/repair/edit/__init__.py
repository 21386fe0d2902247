"""Making an edit: the text steps and their prompts, SEARCH/REPLACE parsing, edit samples."""
