"""Hard cases 16-30: argument types that must survive producer mirror -> JSON -> worker."""
