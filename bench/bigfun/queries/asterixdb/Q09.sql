-- Q9 spatial selection: sender screen name and text of the chirps whose sender_location lies
-- within circle(point({{x}}, {{y}}), {{radius}}) (boundary included); the rtree serves it.
USE bigfun;
SELECT VALUE [c.`user`.screen_name, c.message_text]
FROM ChirpMessages c
WHERE spatial_intersect(c.sender_location,
                        create_circle(create_point({{x}}, {{y}}), {{radius}}));
