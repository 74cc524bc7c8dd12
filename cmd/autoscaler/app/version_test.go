package app

import (
	"testing"

	"github.com/promscaler/promscaler/internal/version/versiontest"
)

func TestVersionFlag(t *testing.T) { versiontest.CheckFlag(t, "autoscaler", run) }
