"""The Kiwix DAG's node modules (also part of the ask DAG): candidates, disambiguation, scoring and
multi-book fusion."""
