package job

import "time"

// Progress is a fraction of a job's work done, and when rank 0 reported it.
type Progress struct {
	Fraction float64   `json:"fraction"`
	At       time.Time `json:"at"`
}
