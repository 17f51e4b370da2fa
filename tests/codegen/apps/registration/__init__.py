"""Hard cases 1-9 and 13: the ways a task gets registered, and names that collide."""
