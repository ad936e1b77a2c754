/* figure: a side-by-side PNG of greyscale slices with a window/level each
 * and two lines of text above each panel (a built-in 5x7 bitmap font:
 * A-Z, 0-9 and " -+.,:%()/=", lower case drawn as upper case), for the
 * quality harness (`ldct quality --png`, docs/quality.png).
 *
 * Panels are scaled up by an integer factor so that each is at least 256
 * pixels wide (nearest neighbour: no smoothing hides or adds noise).
 * Any thread; libpng. Returns 0, -errno, -ENOMEM or LDCT_EINPUT.
 */
#ifndef LDCT_PIPELINE_FIGURE_H
#define LDCT_PIPELINE_FIGURE_H

typedef struct figure_panel {
    const float *pixels;  /* nx * ny values, row-major */
    double centre, width; /* window: centre - width/2 is black, + width/2 white */
    const char *label;    /* first text line (may be NULL) */
    const char *caption;  /* second text line (may be NULL) */
} figure_panel;

int figure_png_write(const char *path, const figure_panel *panels, int n, int nx, int ny);

#endif
