"""The what-if room: the replay of a recorded window under another policy, the policy in force it starts
from, the counterfactual and verdict, the victim order, the tuning suggestions and their scheduler
snippets. Its settings and window are at its foot (settings.py)."""
