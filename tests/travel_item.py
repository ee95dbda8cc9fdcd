"""A TravelPlanner item as the environment writes it (tests/domains/test_travelplanner_domain.py, and the family
domains' generation test)."""

ITEM = {
    "org": "Tulsa", "dest": "Omaha", "days": 3, "visiting_city_number": 1,
    "date": ["2022-04-02", "2022-04-03", "2022-04-04"], "people_number": 1,
    "local_constraint": {"house rule": None, "cuisine": None, "room type": None, "transportation": None},
    "budget": 900, "level": "easy",
    "query": "Please plan a 3-day trip for one person from Tulsa to Omaha, April 2 to April 4, 2022, budget $900.",
    "database": {
        "flights": [
            {"Flight Number": "F7000001", "Price": 110, "DepTime": "07:00", "ArrTime": "08:30",
             "FlightDate": "2022-04-02", "OriginCityName": "Tulsa", "DestCityName": "Omaha"},
            {"Flight Number": "F7000002", "Price": 120, "DepTime": "18:00", "ArrTime": "19:30",
             "FlightDate": "2022-04-04", "OriginCityName": "Omaha", "DestCityName": "Tulsa"}],
        "accommodations": [
            {"NAME": "Prairie Guest Room", "room type": "Private room", "price": 80, "minimum nights": 1,
             "house_rules": "No parties", "maximum occupancy": 2, "city": "Omaha"},
            {"NAME": "Old Market Penthouse", "room type": "Entire home/apt", "price": 700, "minimum nights": 1,
             "house_rules": "No smoking", "maximum occupancy": 4, "city": "Omaha"}],
        "restaurants": [{"Name": n, "City": "Omaha", "Cuisines": c, "Average Cost": p} for n, c, p in [
            ("Bison Grill", "American, BBQ", 20), ("Lotus Garden", "Chinese", 15), ("Casa Verde", "Mexican", 18),
            ("Trattoria Nove", "Italian, Cafe", 25), ("Spice Route", "Indian", 16), ("Morning Crust", "Bakery", 10)]],
        "attractions": [{"Name": n, "City": "Omaha"} for n in ("Riverfront Walk", "Henry Doorly Zoo", "Joslyn Hall")],
        "distance": [{"origin": "Tulsa", "destination": "Omaha", "duration": "5 hours 50 mins", "distance": "620 km"},
                     {"origin": "Omaha", "destination": "Tulsa", "duration": "5 hours 52 mins", "distance": "621 km"}],
        "cities": {"Tulsa": "Oklahoma", "Omaha": "Nebraska"},
    },
}
