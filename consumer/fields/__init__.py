"""Fields against a JSON Schema (the extract option), each with the page and boxes it came from."""
