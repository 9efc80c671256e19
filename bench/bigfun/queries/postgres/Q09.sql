-- Q9 spatial selection: sender screen name and text of the chirps whose sender location lies
-- within circle(point({{x}}, {{y}}), {{radius}}) (boundary included). No PostGIS: the distance
-- is written out.
SELECT c.screen_name, c.message_text
FROM ChirpMessages c
WHERE sqrt((c.sender_location_x - {{x}}) ^ 2 + (c.sender_location_y - {{y}}) ^ 2) <= {{radius}}
