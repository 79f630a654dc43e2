module cloudrunner.invalid/cloudrunner-hook

go 1.19
