"""General helpers every room may use, importing no other room: ``plain_values`` (an int or a number, never a bool;
a number slime or numpy hands over read as one float) and ``warn_once`` (one warning per kind of trouble)."""
