"""Plain helper libraries shared by the node modules (never handed to a Hamilton driver): value
types, the text toolkit, ranking rules, the reader and the concept-map lookup."""
