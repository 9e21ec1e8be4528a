"""A step's waves: ``wave_planner`` (the one owner of a step's waves: sizes each, records it, hands it over at the close) and ``wave_size`` (how large a wave must be to fill the batch).
"""
