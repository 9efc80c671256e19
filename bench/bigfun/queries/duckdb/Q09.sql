-- Q9 spatial selection: sender screen name and text of the chirps whose sender_location lies
-- within circle(point({{x}}, {{y}}), {{radius}}) (boundary included). No spatial extension:
-- the distance is written out.
SELECT c."user".screen_name AS screen_name, c.message_text
FROM ChirpMessages c
WHERE sqrt((c.sender_location.x - {{x}}) ** 2 + (c.sender_location.y - {{y}}) ** 2) <= {{radius}}
