"""`compress search`: the fastest (or smallest) model that keeps a share of the teacher's accuracy, found by
measurement across every family and chain.

:mod:`.search` checks the question and drives it all. :mod:`.space` reads the space the methods declare (and the user
narrows) as pipelines; :mod:`.probe` sizes a candidate from its shape and times its structure and its training steps
before anything trains. :mod:`.walk` is the schedule: it trains candidates in order of their objective, each stopped
once it cannot reach the bar; :mod:`.screen` is the rule that keeps or drops a trained candidate on the held-out
sentences, :mod:`.clock` the budget spent, :mod:`.costs` what runs will cost and the reserve the finals need, and
:mod:`.finals` the finals that choose on every seed and judge on test. :mod:`.resolution` says how finely the held-out
sentences resolve a retention before training; :mod:`.ledger` is the search's record (search.json) and :mod:`.report`
its report (search.md, search.html, search.png).
"""
