"""The documentation: every shown command and output is run and compared; the site builds."""
