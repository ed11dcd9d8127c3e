package coord
