package adminserver

import (
	"net/http"

	"github.com/sluice-dev/sluice/internal/apierror"
)

// The errors of the admin API. Their codes are part of the documented API
// (docs/ROUTER.md).
var (
	errAdminUnauthorized = apierror.New(http.StatusUnauthorized, apierror.TypeAuthentication, "invalid_admin_token",
		"Missing or invalid admin token.")
	errTierNotFound = apierror.New(http.StatusNotFound, apierror.TypeInvalidRequest, "tier_not_found",
		"No such tier on this router.")
	errMemberNotFound = apierror.New(http.StatusNotFound, apierror.TypeInvalidRequest, "member_not_found",
		"No such member in the tier.")
	errDirectTierMember = apierror.New(http.StatusConflict, apierror.TypeInvalidRequest, "direct_tier",
		"A direct tier (one member) has no member scope; drain the tier.")
	errNotQuiesced = apierror.New(http.StatusConflict, apierror.TypeInvalidRequest, "not_quiesced",
		"The scope is not quiesced; quiesce it in the ReplicaTier first.")
	errDrainTimeout = apierror.New(http.StatusGatewayTimeout, apierror.TypeServer, "drain_timeout",
		"The scope still holds requests at the end of the timeout.")
	errBadTimeout = apierror.New(http.StatusBadRequest, apierror.TypeInvalidRequest, "invalid_timeout",
		"timeout must be a positive Go duration of at most 10m.")
)
