"""The Sun and the instrument in numbers: bands, slots and the solar ephemeris, the radiance coding and display mapping, solar rotation and the alignment of frames."""
