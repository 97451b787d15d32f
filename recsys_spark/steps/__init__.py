"""The arrows of the day's data flow: validate, label, slices, health, rules, custom rules."""
